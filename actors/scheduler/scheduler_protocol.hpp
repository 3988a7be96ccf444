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

// Receives one request's tokens as they are sampled, then one FinishEvent per sample.
using token_sink = caf::typed_actor<caf::reacts_to<TokenEvent>, caf::reacts_to<FinishEvent>>;

struct EngineStats {
  SchedulerCounts counts;
  kv::KvStats kv;
  std::uint64_t steps = 0;
};

// submit: accepted, queue_full (HTTP 429), too_long or invalid.
// abort:  true when the request was known; its sink gets FinishEvent{abort} per sample.
// stats:  queue lengths, KV occupancy after the last step, steps run.
// tick:   internal (the dynamic regime's batching delay).
using scheduler_actor = caf::typed_actor<
    caf::replies_to<RequestSpec, token_sink>::with<SubmitStatus>,
    caf::replies_to<sched_abort_atom, RequestId>::with<bool>,
    caf::replies_to<sched_stats_atom>::with<EngineStats>,
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
typename Inspector::result_type inspect(Inspector& f, SchedulerCounts& x) {
  return f(caf::meta::type_name("SchedulerCounts"), x.waiting, x.running, x.swapped, x.preemptions);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngineStats& x) {
  return f(caf::meta::type_name("EngineStats"), x.counts, x.kv, x.steps);
}

}  // namespace actorlm::scheduler
