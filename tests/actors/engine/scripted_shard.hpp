#pragma once
// A test double for a shard (tests only; not a backend): it answers each step with the
// scripted tokens (tests/actors/scheduler/scheduler_harness.hpp's scripted_token) after a
// fixed duration of actor-clock time, and records which steps each rank received.

#include "actors/shard/sequence_state.hpp"
#include "actors/shard/shard_protocol.hpp"
#include "tests/actors/scheduler/scheduler_harness.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <map>
#include <vector>

namespace actorlm::testing {

struct ShardLog {
  std::map<std::uint32_t, std::vector<std::uint64_t>> steps_by_rank;
};

using shard_done_atom = caf::atom_constant<caf::atom("sh_done")>;

struct ScriptedShardState {
  std::map<std::uint64_t, caf::typed_response_promise<shard::StepResult>> pending;
  shard::SequenceState held;  // the sequences, from the incremental steps
  static inline const char* name = "scripted_shard";
};

using scripted_shard_actor =
    caf::typed_actor<caf::replies_to<shard::Step>::with<shard::StepResult>,
                     caf::reacts_to<shard_done_atom, shard::StepResult>>;

inline scripted_shard_actor::behavior_type scripted_shard(
    scripted_shard_actor::stateful_pointer<ScriptedShardState> self, std::uint32_t rank,
    std::int64_t step_ns, ShardLog* log) {
  return {
      [=](const shard::Step& step) -> caf::result<shard::StepResult> {
        if (log != nullptr) log->steps_by_rank[rank].push_back(step.id);
        if (rank != 0) return shard::StepResult{step.id, {}, {}, step_ns};
        auto rp = self->make_response_promise<shard::StepResult>();
        self->state.pending.emplace(step.id, rp);
        self->state.held.apply(step);
        self->delayed_send(self, std::chrono::nanoseconds(step_ns), shard_done_atom::value,
                           scheduler::testing::scripted_result(self->state.held, step, step_ns));
        return rp;
      },
      [=](shard_done_atom, shard::StepResult& r) {
        auto it = self->state.pending.find(r.step_id);
        it->second.deliver(std::move(r));
        self->state.pending.erase(it);
      },
  };
}

inline shard::shard_actor spawn_scripted_shard(caf::actor_system& sys, std::uint32_t rank,
                                               std::int64_t step_ns, ShardLog* log) {
  return caf::actor_cast<shard::shard_actor>(sys.spawn(scripted_shard, rank, step_ns, log));
}

}  // namespace actorlm::testing
