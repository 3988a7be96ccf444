#pragma once
// The engine wires the runtime: a block-manager actor, engine.world_size() shard actors of
// the configured backend, and the scheduler actor that drives them. Two ways to use it:
// spawn_engine() hands back the actor handles (for code that is itself an actor, or tests on
// CAF's test coordinator); Engine is a blocking C++ facade over them (submit / abort / stats).

#include "actors/config/config.hpp"
#include "actors/scheduler/scheduler_protocol.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace caf { class actor_system; }

namespace actorlm::engine {

// Creates the shard actor of one rank (rank in [0, world), world = engine.world_size()).
using ShardFactory =
    std::function<shard::shard_actor(caf::actor_system&, std::uint32_t rank, std::uint32_t world)>;

// How many KV blocks the backend's memory budget leaves (device, and host for swap).
// What the backend offers: KV blocks for its memory budget, and the model's vocabulary size
// (token ids at or above it are refused at submission; 0: not checked).
struct KvCapacity {
  std::uint32_t device_blocks = 0;
  std::uint32_t host_blocks = 0;
  std::uint32_t vocab_size = 0;
  // The rank that samples and whose answer the scheduler awaits: 0, or a layer split's last
  // stage (below world_size).
  std::uint32_t answering_rank = 0;
};

struct EngineActors {
  kv::block_manager_actor block_manager;
  std::vector<shard::shard_actor> shards;
  scheduler::scheduler_actor scheduler;
};

// What the engine's client does for itself, so that the engine need not.
struct EngineOptions {
  bool record_token_times = true;  // scheduler::SchedulerOptions::record_token_times
};

// Throws std::invalid_argument when the configuration cannot be served (no KV blocks...).
// `shard_locations` ([world] or empty) names where each rank runs, for error messages.
EngineActors spawn_engine(caf::actor_system&, const config::Config&, KvCapacity,
                          const ShardFactory&, std::vector<std::string> shard_locations = {},
                          EngineOptions = {});
// Stops every actor of the engine.
void stop_engine(const EngineActors&);

// Thread-safe: each call waits on a scoped actor of its own.
class Engine {
 public:
  Engine(caf::actor_system&, const config::Config&, KvCapacity, const ShardFactory&,
         std::vector<std::string> shard_locations = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // unavailable once the engine is unhealthy (stats().healthy == false; stats().failure says why).
  scheduler::SubmitStatus submit(scheduler::RequestSpec, scheduler::token_sink sink);
  bool abort(scheduler::RequestId);
  scheduler::EngineStats stats();
  // The block manager's occupancy now (stats() reports it as of the last step). Throws
  // std::runtime_error when the block manager is gone or does not answer within 5 s.
  kv::KvStats kv_stats();
  std::vector<scheduler::StepRecord> take_step_records();
  std::vector<scheduler::RequestRecord> take_request_records();
  // An unhealthy engine takes new shards for its ranks (see scheduler_protocol.hpp, replace);
  // true when it is healthy again.
  bool replace_shards(std::vector<shard::shard_actor> shards, std::vector<std::string> locations = {});
  const EngineActors& actors() const { return actors_; }

 private:
  caf::actor_system& sys_;
  EngineActors actors_;
};

}  // namespace actorlm::engine
