#include "actors/shard/cuda/cuda_shard_actor.hpp"

#include "actors/shard/executor_actor.hpp"

namespace actorlm::shard {

shard_actor spawn_cuda_shard(caf::actor_system& sys, std::unique_ptr<CudaShard> shard) {
  return spawn_executor_shard(sys, std::move(shard), "cuda");
}

}  // namespace actorlm::shard
