#pragma once
// The head's side of a cluster: reaches every worker of [cluster] workers (mutual TLS when the
// cluster has certificates), checks that each runs the head's configuration, and has them host
// their ranks (cluster.placement), the data plane joined through a rendezvous store the head
// serves. The entry "head" is this process: its ranks go to a worker actor spawned here (the
// same hello and hosting, no network), which loads their weights beside the tokenizer. The shard actors it hands back are remote: the engine addresses them like local ones,
// and the scheduler's monitor turns a lost worker into a failed engine within the heartbeat.

#include "actors/config/config.hpp"
#include "actors/shard/shard_protocol.hpp"
#include "actors/cluster/cluster_protocol.hpp"

#include <string>
#include <vector>

namespace caf { class actor_system; }

namespace actorlm::cluster {

class ClusterShards {
 public:
  // Throws std::runtime_error naming the worker and what went wrong: unreachable within
  // cluster.connect_timeout_s, a TLS handshake refused, a configuration that differs (both
  // sides named), a failure loading its ranks.
  ClusterShards(caf::actor_system& sys, const config::Config& cfg, const std::string& identity);
  // Stops the rendezvous store, whose loss tells the workers that this head is gone.
  ~ClusterShards();
  ClusterShards(const ClusterShards&) = delete;
  ClusterShards& operator=(const ClusterShards&) = delete;

  const std::vector<shard::shard_actor>& shards() const { return shards_; }  // [world]
  const std::vector<std::string>& locations() const { return locations_; }   // [world] "worker host:port" or "the head"

 private:
  // The head's own worker (with "head" in cluster.workers), stopped with this object, also when
  // the constructor throws after spawning it; its ranks stop with it.
  struct LocalWorker {
    worker_actor actor;
    LocalWorker() = default;
    LocalWorker(const LocalWorker&) = delete;
    LocalWorker& operator=(const LocalWorker&) = delete;
    ~LocalWorker() { stop(); }
    void stop();
  };
  LocalWorker local_;
  store_actor store_;
  std::vector<shard::shard_actor> shards_;
  std::vector<std::string> locations_;
};

// How this process names itself to its workers: "actorlm (pid 123) on host".
std::string head_name();

}  // namespace actorlm::cluster
