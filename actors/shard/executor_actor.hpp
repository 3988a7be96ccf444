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

#include <memory>

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

}  // namespace actorlm::shard
