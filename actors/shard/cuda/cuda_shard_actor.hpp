#pragma once
// The cuda backend's shard actor: owns a CudaShard (one GPU) and answers each Step with its
// StepResult; detached, as the cpu backend's (actors/shard/executor_actor.hpp).

#include "actors/shard/cuda/cuda_shard.hpp"
#include "actors/shard/shard_protocol.hpp"

namespace caf { class actor_system; }

namespace actorlm::shard {

shard_actor spawn_cuda_shard(caf::actor_system& sys, std::unique_ptr<CudaShard> shard);

}  // namespace actorlm::shard
