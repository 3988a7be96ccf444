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

#include <string>

namespace actorlm::scheduler {

using sched_abort_atom = caf::atom_constant<caf::atom("s_abort")>;
using sched_stats_atom = caf::atom_constant<caf::atom("s_stats")>;
using sched_tick_atom = caf::atom_constant<caf::atom("s_tick")>;
using sched_records_atom = caf::atom_constant<caf::atom("s_records")>;
using sched_requests_atom = caf::atom_constant<caf::atom("s_requests")>;
using sched_watchdog_atom = caf::atom_constant<caf::atom("s_watchdog")>;
using sched_replace_atom = caf::atom_constant<caf::atom("s_replace")>;
using sched_step_failed_atom = caf::atom_constant<caf::atom("s_stepfail")>;

// What one step produced for the requests of one sink: their tokens in order, then the
// samples that finished. A sink gets at most one batch per step (one message, however many of
// its requests ran), and a request's last batch holds one FinishEvent per sample. `error` says
// what failed when some of `finished` carry FinishReason::error (empty otherwise), e.g.
// "shard rank 0 failed step 12: ..." or "shard rank 1 stopped: ...".
struct SinkBatch {
  std::vector<TokenEvent> tokens;
  std::vector<FinishEvent> finished;
  std::string error;
};

// Receives the tokens of the requests submitted with it.
using token_sink = caf::typed_actor<caf::reacts_to<SinkBatch>>;

// healthy turns false when a shard actor or the block manager stops (or the block manager
// misses its deadline); `failure` then names the component and why, and every later submission
// is refused with SubmitStatus::unavailable, until new shards replace the lost ones (replace).
struct EngineStats {
  SchedulerCounts counts;
  kv::KvStats kv;
  std::uint64_t steps = 0;
  bool healthy = true;
  std::string failure;
};

// submit: accepted, queue_full (HTTP 429), too_long, invalid, or unavailable (the engine is
//         unhealthy: HTTP 503).
// abort:  true when the request was known; its sink gets FinishEvent{abort} per sample.
// stats:  queue lengths, KV occupancy after the last step, steps run, health.
// records: drains the per-step records kept since the last call (metrics, benchmarks).
// requests: drains the records of requests finished since the last call (the newest
//          max_kept_records at most are kept between calls).
// tick:   internal (the dynamic regime's batching delay).
// watchdog: internal (the deadline of the step or reservation in flight; see scheduler_actor.hpp).
// step_failed: internal (rank 0's error for a step, acted on after a grace period; see there).
// replace: an unhealthy engine whose block manager is up takes new shards (one per rank, and
//          where each runs, for messages): the block manager is reset (the lost shards held
//          the blocks' contents), the engine is healthy again and serves. False, and nothing
//          changes, when the engine is healthy, its block manager is gone, or the rank count
//          differs.
using scheduler_actor = caf::typed_actor<
    caf::replies_to<RequestSpec, token_sink>::with<SubmitStatus>,
    caf::replies_to<sched_abort_atom, RequestId>::with<bool>,
    caf::replies_to<sched_stats_atom>::with<EngineStats>,
    caf::replies_to<sched_records_atom>::with<std::vector<StepRecord>>,
    caf::replies_to<sched_requests_atom>::with<std::vector<RequestRecord>>,
    caf::replies_to<sched_replace_atom, std::vector<shard::shard_actor>, std::vector<std::string>>::with<bool>,
    caf::reacts_to<sched_tick_atom>,
    caf::reacts_to<sched_watchdog_atom>,
    caf::reacts_to<sched_step_failed_atom, std::uint64_t, std::string>>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestSpec& x) {
  return f(caf::meta::type_name("RequestSpec"), x.id, x.prompt, x.max_tokens, x.n, x.priority,
           x.stop_token_ids, x.eos_token_id, x.ignore_eos, x.min_tokens, x.sampling);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenEvent& x) {
  return f(caf::meta::type_name("TokenEvent"), x.request, x.sample, x.token, x.logprob, x.cached_prompt_tokens, x.top, x.prompt_logprobs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FinishEvent& x) {
  return f(caf::meta::type_name("FinishEvent"), x.request, x.sample, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SinkBatch& x) {
  return f(caf::meta::type_name("SinkBatch"), x.tokens, x.finished, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SchedulerCounts& x) {
  return f(caf::meta::type_name("SchedulerCounts"), x.waiting, x.running, x.swapped, x.preemptions,
           x.swap_outs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepRecord& x) {
  return f(caf::meta::type_name("StepRecord"), x.id, x.start, x.end, x.batch_size,
           x.prefill_tokens, x.decode_tokens, x.kv_used_blocks, x.kv_total_blocks, x.preemptions, x.shard_ns);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestRecord& x) {
  return f(caf::meta::type_name("RequestRecord"), x.id, x.prompt_tokens, x.cached_tokens, x.n, x.arrival,
           x.first_scheduled, x.first_token, x.finished, x.token_times, x.output_tokens, x.reasons,
           x.preemptions);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngineStats& x) {
  return f(caf::meta::type_name("EngineStats"), x.counts, x.kv, x.steps, x.healthy, x.failure);
}

}  // namespace actorlm::scheduler
