#pragma once
// Spawns the scheduler actor: it owns a Scheduler policy and drives one iteration at a time:
// plan -> block manager (reserve) -> every shard (execute; one answers: rank 0, or a layer
// split's last stage, SchedulerOptions::answering_rank; "rank 0" below) -> token sinks.
// Time comes from the actor clock, so the same actor runs on CAF's test coordinator.
//
// Failures (DESIGN.md: a lost shard fails its requests with a clear error, never a hang):
// - A step that rank 0 answers with an error, or leaves unanswered past its deadline
//   (SchedulerOptions::step_timeout after it was sent), ends the requests it carried with
//   FinishReason::error; their blocks are freed as an abort's are, and the engine goes on.
//   A late answer for that step is ignored.
// - The actor monitors every shard actor (null handles, the simulator's idle ranks, are
//   skipped) and the block manager. When one stops, or the block manager leaves a reservation
//   unanswered past the deadline or answers it with an error, the engine turns unhealthy for
//   good: every request ends with FinishReason::error naming the component, EngineStats says
//   healthy = false with the reason, and submissions get SubmitStatus::unavailable. Whoever
//   owns the process (actorlm serve) then drains and exits for a supervisor to restart it.
// - Deadlines cost one timer per engine, not one per request: CAF 0.17 never cancels a finite
//   request timeout, so those would pile up in the clock. At most one watchdog message is
//   pending; when it fires it fails what is in flight past its deadline, or re-arms for the
//   deadline of what is in flight now, and it is never re-armed while idle (a virtual-time
//   driver runs until no timeout is pending).
// - stop_engine() sends the scheduler its exit before the shards theirs, so a normal shutdown
//   is not mistaken for a lost shard.

#include "actors/scheduler/scheduler_protocol.hpp"

#include <vector>

namespace caf { class actor_system; }

namespace actorlm::scheduler {

scheduler_actor spawn_scheduler(caf::actor_system&, const SchedulerOptions&,
                                kv::block_manager_actor block_manager,
                                std::vector<shard::shard_actor> shards);

}  // namespace actorlm::scheduler
