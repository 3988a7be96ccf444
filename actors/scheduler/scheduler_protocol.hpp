#pragma once
// Typed interfaces of the scheduler actor and of a request's token sink, with inspect() for
// their messages. Include only where CAF is used.

#include "actors/kv/block_manager_protocol.hpp"
#include "actors/scheduler/request.hpp"
#include "actors/scheduler/scheduler.hpp"
#include "actors/shard/shard_protocol.hpp"

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace actorlm::scheduler {

using sched_abort_atom = caf::atom_constant<caf::atom("s_abort")>;
using sched_stats_atom = caf::atom_constant<caf::atom("s_stats")>;
using sched_tick_atom = caf::atom_constant<caf::atom("s_tick")>;
using sched_records_atom = caf::atom_constant<caf::atom("s_records")>;
using sched_requests_atom = caf::atom_constant<caf::atom("s_requests")>;

// What one step produced for the requests of one sink: their tokens in order, then the
// samples that finished. A sink gets at most one batch per step (one message, however many of
// its requests ran), and a request's last batch holds one FinishEvent per sample.
struct SinkBatch {
  std::vector<TokenEvent> tokens;
  std::vector<FinishEvent> finished;
};

// Receives the tokens of the requests submitted with it.
using token_sink = caf::typed_actor<caf::reacts_to<SinkBatch>>;

struct EngineStats {
  SchedulerCounts counts;
  kv::KvStats kv;
  std::uint64_t steps = 0;
};

// submit: accepted, queue_full (HTTP 429), too_long or invalid.
// abort:  true when the request was known; its sink gets FinishEvent{abort} per sample.
// stats:  queue lengths, KV occupancy after the last step, steps run.
// records: drains the per-step records kept since the last call (metrics, benchmarks).
// requests: drains the records of requests finished since the last call (the newest 65,536 at
//          most are kept between calls).
// tick:   internal (the dynamic regime's batching delay).
using scheduler_actor = caf::typed_actor<
    caf::replies_to<RequestSpec, token_sink>::with<SubmitStatus>,
    caf::replies_to<sched_abort_atom, RequestId>::with<bool>,
    caf::replies_to<sched_stats_atom>::with<EngineStats>,
    caf::replies_to<sched_records_atom>::with<std::vector<StepRecord>>,
    caf::replies_to<sched_requests_atom>::with<std::vector<RequestRecord>>,
    caf::reacts_to<sched_tick_atom>>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestSpec& x) {
  return f(caf::meta::type_name("RequestSpec"), x.id, x.prompt, x.max_tokens, x.n, x.priority,
           x.stop_token_ids, x.eos_token_id, x.sampling);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenEvent& x) {
  return f(caf::meta::type_name("TokenEvent"), x.request, x.sample, x.token, x.logprob, x.top);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FinishEvent& x) {
  return f(caf::meta::type_name("FinishEvent"), x.request, x.sample, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SinkBatch& x) {
  return f(caf::meta::type_name("SinkBatch"), x.tokens, x.finished);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SchedulerCounts& x) {
  return f(caf::meta::type_name("SchedulerCounts"), x.waiting, x.running, x.swapped, x.preemptions,
           x.swap_outs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepRecord& x) {
  return f(caf::meta::type_name("StepRecord"), x.id, x.start, x.end, x.batch_size,
           x.prefill_tokens, x.decode_tokens, x.kv_used_blocks, x.kv_total_blocks, x.preemptions);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestRecord& x) {
  return f(caf::meta::type_name("RequestRecord"), x.id, x.prompt_tokens, x.n, x.arrival,
           x.first_scheduled, x.first_token, x.finished, x.token_times, x.output_tokens, x.reasons,
           x.preemptions);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngineStats& x) {
  return f(caf::meta::type_name("EngineStats"), x.counts, x.kv, x.steps);
}

}  // namespace actorlm::scheduler
