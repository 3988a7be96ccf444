#pragma once
// Test doubles that fail on purpose (tests only): a shard that answers like the scripted shard
// (tests/actors/engine/scripted_shard.hpp) except at one step, where it replies with an error,
// never replies, or replies late; and a block-manager proxy that forwards to the real block
// manager but withholds its answer to one reservation.

#include "actors/kv/block_manager_protocol.hpp"
#include "actors/shard/shard_protocol.hpp"
#include "actors/shard/sequence_state.hpp"
#include "tests/actors/scheduler/scheduler_harness.hpp"

#include <caf/actor_system.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <map>
#include <set>
#include <vector>

namespace actorlm::testing {

struct FaultPlan {
  enum class Kind { none, error, hang, late } kind = Kind::none;
  std::uint64_t step = 0;        // the step id it happens at (error, hang, late)
  std::set<std::uint64_t> more_steps;  // error: these steps fail too
  std::int64_t late_ns = 0;      // late: the reply comes this long after the step's duration
  // What rank 0 saw: step id -> actor-clock time (ns) it arrived.
  std::map<std::uint64_t, std::int64_t> received;
};

using faulty_done_atom = caf::atom_constant<caf::atom("fs_done")>;

struct FaultyShardState {
  std::map<std::uint64_t, caf::typed_response_promise<shard::StepResult>> pending;
  shard::SequenceState held;  // the sequences, from the incremental steps
  static inline const char* name = "faulty_shard";
};

using faulty_shard_actor = caf::typed_actor<caf::replies_to<shard::Step>::with<shard::StepResult>,
                                            caf::reacts_to<faulty_done_atom, shard::StepResult>>;

inline std::int64_t clock_ns(caf::local_actor* self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(self->clock().now().time_since_epoch()).count();
}

inline faulty_shard_actor::behavior_type faulty_shard(
    faulty_shard_actor::stateful_pointer<FaultyShardState> self, std::uint32_t rank, std::int64_t step_ns,
    FaultPlan* plan) {
  return {
      [=](const shard::Step& step) -> caf::result<shard::StepResult> {
        if (rank != 0) return shard::StepResult{step.id, {}, {}, step_ns};
        plan->received[step.id] = clock_ns(self);
        self->state.held.apply(step);
        const bool faulty = step.id == plan->step || plan->more_steps.count(step.id) > 0;
        if (faulty && plan->kind == FaultPlan::Kind::error)
          return caf::make_error(caf::sec::runtime_error, "injected fault at step " + std::to_string(step.id));
        auto rp = self->make_response_promise<shard::StepResult>();
        self->state.pending.emplace(step.id, rp);
        if (faulty && plan->kind == FaultPlan::Kind::hang) return rp;  // kept, never delivered
        const std::int64_t delay = step_ns + (faulty && plan->kind == FaultPlan::Kind::late ? plan->late_ns : 0);
        self->delayed_send(self, std::chrono::nanoseconds(delay), faulty_done_atom::value,
                           scheduler::testing::scripted_result(self->state.held, step, step_ns));
        return rp;
      },
      [=](faulty_done_atom, shard::StepResult& r) {
        auto it = self->state.pending.find(r.step_id);
        it->second.deliver(std::move(r));
        self->state.pending.erase(it);
      },
  };
}

inline shard::shard_actor spawn_faulty_shard(caf::actor_system& sys, std::uint32_t rank, std::int64_t step_ns,
                                             FaultPlan* plan) {
  return caf::actor_cast<shard::shard_actor>(sys.spawn(faulty_shard, rank, step_ns, plan));
}

// Forwards everything to `real`, except that the reservation number `withhold` (1-based) is
// never answered.
struct WithholdingState {
  std::uint64_t reservations = 0;
  std::vector<caf::typed_response_promise<kv::ReserveReply>> withheld;
  static inline const char* name = "withholding_block_manager";
};

inline kv::block_manager_actor::behavior_type withholding_block_manager(
    kv::block_manager_actor::stateful_pointer<WithholdingState> self, kv::block_manager_actor real,
    std::uint64_t withhold) {
  return {
      [=](kv::ReserveRequest& req) -> caf::result<kv::ReserveReply> {
        if (++self->state.reservations == withhold) {
          auto rp = self->make_response_promise<kv::ReserveReply>();
          self->state.withheld.push_back(rp);
          return rp;
        }
        return self->delegate(real, std::move(req));
      },
      [=](kv::kv_fork_atom a, kv::SeqId p, kv::SeqId c) { return self->delegate(real, a, p, c); },
      [=](kv::kv_free_atom a, std::vector<kv::SeqId>& s) { return self->delegate(real, a, std::move(s)); },
      [=](kv::kv_abort_atom a, std::vector<kv::SeqId>& s) { return self->delegate(real, a, std::move(s)); },
      [=](kv::kv_stats_atom a) { return self->delegate(real, a); },
      [=](kv::kv_reset_atom a) { return self->delegate(real, a); },
  };
}

}  // namespace actorlm::testing
