#pragma once
// The shard actor of a backend whose work runs in a plain C++ executor (CpuShard, CudaShard):
// owns it and answers each Step with its StepResult, or with an error naming the rank and the
// step when the executor throws. Spawned detached (a thread of its own): a step blocks for its
// whole forward pass, and the ranks of a tensor-parallel group must run their all-reduces at the
// same time. Include only in the backend's actor source (CAF headers).
//
// Shard: StepResult execute(const Step&); std::int32_t shard_rank() const.

#include "actors/shard/shard_protocol.hpp"

#include <caf/actor_system.hpp>
#include <caf/sec.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace actorlm::shard {

template <class Shard>
struct ExecutorShardState {
  std::shared_ptr<Shard> shard;
  const char* backend = "";
  static inline const char* name = "executor_shard";
};

template <class Shard>
shard_actor::behavior_type executor_shard(typename shard_actor::stateful_pointer<ExecutorShardState<Shard>> self,
                                          std::shared_ptr<Shard> shard, const char* backend) {
  self->state.shard = std::move(shard);
  self->state.backend = backend;
  return {
      [self](const Step& step) -> caf::result<StepResult> {
        try {
          return self->state.shard->execute(step);
        } catch (const std::exception& e) {
          spdlog::error("{} shard rank {}: step {}: {}", self->state.backend, self->state.shard->shard_rank(), step.id,
                        e.what());
          return caf::make_error(caf::sec::runtime_error, e.what());
        }
      },
  };
}

// `backend` names the shard in the log ("cpu", "cuda"); a string literal.
template <class Shard>
shard_actor spawn_executor_shard(caf::actor_system& sys, std::unique_ptr<Shard> shard, const char* backend) {
  // A shared_ptr: CAF copies spawn arguments into the actor's initial message.
  return sys.spawn<caf::detached>(executor_shard<Shard>, std::shared_ptr<Shard>(std::move(shard)), backend);
}

// A backend's shard factory (engine::ShardFactory) over the executors it loaded: shards[i] is
// rank ranks[i] of `world`. Each rank's actor is spawned once; a rank asked twice, not hosted
// here, or of another world size is a std::logic_error.
template <class Shard>
std::function<shard_actor(caf::actor_system&, std::uint32_t, std::uint32_t)> executor_factory(
    std::shared_ptr<std::vector<std::unique_ptr<Shard>>> shards, std::vector<std::uint32_t> ranks, std::uint32_t world,
    const char* backend) {
  return [shards, ranks = std::move(ranks), world, backend](caf::actor_system& sys, std::uint32_t rank,
                                                            std::uint32_t world_size) {
    const auto it = std::find(ranks.begin(), ranks.end(), rank);
    const auto i = static_cast<std::size_t>(it - ranks.begin());
    if (it == ranks.end() || !(*shards)[i] || world_size != world)
      throw std::logic_error(std::string(backend) + " backend: shard " + std::to_string(rank) + " of " +
                             std::to_string(world_size) + " requested twice or not hosted here");
    return spawn_executor_shard(sys, std::move((*shards)[i]), backend);
  };
}

}  // namespace actorlm::shard
