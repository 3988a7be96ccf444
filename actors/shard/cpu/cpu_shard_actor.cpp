#include "actors/shard/cpu/cpu_shard_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/sec.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

namespace actorlm::shard {

namespace {

struct CpuShardState {
  std::shared_ptr<CpuShard> shard;
  static inline const char* name = "cpu_shard";
};

shard_actor::behavior_type cpu_shard(shard_actor::stateful_pointer<CpuShardState> self,
                                     std::shared_ptr<CpuShard> shard) {
  self->state.shard = std::move(shard);
  return {
      [self](const Step& step) -> caf::result<StepResult> {
        try {
          return self->state.shard->execute(step);
        } catch (const std::exception& e) {
          spdlog::error("cpu shard rank {}: step {}: {}", self->state.shard->weights().shard_rank(), step.id,
                        e.what());
          return caf::make_error(caf::sec::runtime_error, e.what());
        }
      },
  };
}

}  // namespace

shard_actor spawn_cpu_shard(caf::actor_system& sys, std::unique_ptr<CpuShard> shard) {
  // A shared_ptr: CAF copies spawn arguments into the actor's initial message.
  return sys.spawn<caf::detached>(cpu_shard, std::shared_ptr<CpuShard>(std::move(shard)));
}

}  // namespace actorlm::shard
