#pragma once
// The actor an `actorlm worker` publishes: it hosts shard actors for one head at a time and
// serves nothing else (no remote spawning of arbitrary actors). See cluster_protocol.hpp for the
// protocol; the worker answers a hello with a refusal when the head's fingerprint differs from
// its own (both sides named) or when it already serves another head.

#include "actors/cluster/cluster_protocol.hpp"
#include "actors/config/config.hpp"

#include <string>

namespace caf { class actor_system; }

namespace actorlm::cluster {

struct WorkerOptions {
  config::Config config;      // the worker's own (its backend, model, cache)
  std::string name;           // how it names itself in logs and refusals: its "host:port"
  std::string data_address;   // the address its ranks accept data-plane connections on
  std::string identity;       // serving::Backend::identity of its backend
  std::string description;    // serving::Backend::description
  std::string memory;         // one rank's memory, one line
};

// Detached: hosting ranks loads weights and joins the data plane, which blocks.
worker_actor spawn_worker(caf::actor_system& sys, WorkerOptions options);

}  // namespace actorlm::cluster
