#pragma once
// The cpu backend's shard actor: owns a CpuShard and answers each Step with its StepResult.
// Spawned detached (a thread of its own): a step blocks for its whole forward pass, and the
// ranks of a tensor-parallel group must run their all-reduces at the same time.

#include "actors/shard/cpu/cpu_shard.hpp"
#include "actors/shard/shard_protocol.hpp"

namespace caf { class actor_system; }

namespace actorlm::shard {

shard_actor spawn_cpu_shard(caf::actor_system& sys, std::unique_ptr<CpuShard> shard);

}  // namespace actorlm::shard
