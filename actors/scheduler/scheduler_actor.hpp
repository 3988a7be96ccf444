#pragma once
// Spawns the scheduler actor: it owns a Scheduler policy and drives one iteration at a time:
// plan -> block manager (reserve) -> every shard (execute; rank 0 answers) -> token sinks.
// Time comes from the actor clock, so the same actor runs on CAF's test coordinator.

#include "actors/scheduler/scheduler_protocol.hpp"

#include <vector>

namespace caf { class actor_system; }

namespace actorlm::scheduler {

scheduler_actor spawn_scheduler(caf::actor_system&, const SchedulerOptions&,
                                kv::block_manager_actor block_manager,
                                std::vector<shard::shard_actor> shards);

}  // namespace actorlm::scheduler
