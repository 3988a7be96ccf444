#include "actors/shard/cpu/cpu_shard_actor.hpp"

#include "actors/shard/executor_actor.hpp"

namespace actorlm::shard {

shard_actor spawn_cpu_shard(caf::actor_system& sys, std::unique_ptr<CpuShard> shard) {
  return spawn_executor_shard(sys, std::move(shard), "cpu");
}

}  // namespace actorlm::shard
