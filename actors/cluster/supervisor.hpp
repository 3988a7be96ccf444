#pragma once
// Keeps a head's engine served by its workers. It places the ranks on the workers at start
// (ClusterShards); when the engine fails because a worker is lost (killed, stopped, cut off:
// every request in flight has ended with an error naming it, and new ones get 503), it lets the
// lost ranks go, reconnects with backoff (0.25 s doubling to 2 s), has the workers host the
// ranks again (weights loaded, data plane re-joined), and hands the engine the new shards,
// which resets its KV cache: serving resumes without restarting the head. Each transition is
// logged.

#include "actors/cluster/cluster_status.hpp"
#include "actors/config/config.hpp"
#include "actors/shard/shard_protocol.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace caf { class actor_system; }
namespace actorlm::engine { class Engine; }

namespace actorlm::cluster {

class ClusterShards;

class ClusterSupervisor {
 public:
  // Places the ranks (throws as ClusterShards does: nothing is served without every worker).
  ClusterSupervisor(caf::actor_system& sys, const config::Config& cfg, std::string identity);
  ~ClusterSupervisor();  // stops watching, then lets the workers go
  ClusterSupervisor(const ClusterSupervisor&) = delete;
  ClusterSupervisor& operator=(const ClusterSupervisor&) = delete;

  const std::vector<shard::shard_actor>& shards() const;    // the first placement's, [world]
  const std::vector<std::string>& locations() const;        // [world]
  // Starts watching `engine` (built over shards()); it must outlive this object's watch.
  void watch(engine::Engine& engine);
  // Stops watching (and any recovery under way); the ranks stay until destruction.
  void stop_watching();
  ClusterStatus status() const;

 private:
  void run(engine::Engine& engine);
  // Reconnects until it succeeds or stop; true when the engine took the new shards.
  bool recover(engine::Engine& engine, const std::string& failure);
  // Waits `d` unless stopped; false when stopped.
  bool pause(std::chrono::milliseconds d);

  caf::actor_system& sys_;
  config::Config cfg_;
  std::string identity_;
  std::unique_ptr<ClusterShards> current_;
  std::chrono::milliseconds local_stop_bound_{0};  // how long the head's own ranks may take to stop
  std::atomic<std::uint32_t> workers_up_{0};
  std::atomic<std::uint64_t> failures_{0}, recoveries_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace actorlm::cluster
