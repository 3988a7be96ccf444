#pragma once
// The cluster's control protocol between a head (actorlm serve, generate) and its workers
// (actorlm worker), and the rendezvous store the head serves for the workers' data plane.
// A worker publishes one worker_actor and nothing else: it answers a hello and hosts the ranks
// the head asks for; the shard actors it returns speak the shard protocol. Include only where
// CAF is used.
//
//   head -> worker  hello(HeadHello)         -> WorkerHello (refusal set: not for this head)
//   head -> worker  host(HostRanks)          -> the ranks' shard actors, after their weights
//                                               are loaded and the data plane has joined
//   worker ranks -> head's store: set(key, bytes) -> ok; get(key) -> bytes once set
//
// The worker monitors the head's store: when the head goes (its process, its connection), the
// worker stops that head's shards, frees their memory and waits for the next head.

#include "actors/cluster/fingerprint.hpp"
#include "actors/shard/shard_protocol.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace actorlm::cluster {

using hello_atom = caf::atom_constant<caf::atom("cl_hello")>;
using host_atom = caf::atom_constant<caf::atom("cl_host")>;
using store_set_atom = caf::atom_constant<caf::atom("cl_set")>;
using store_get_atom = caf::atom_constant<caf::atom("cl_get")>;

// The head's rendezvous store for one data-plane group (one per engine start).
using store_actor =
    caf::typed_actor<caf::replies_to<store_set_atom, std::string, std::vector<char>>::with<bool>,
                     caf::replies_to<store_get_atom, std::string>::with<std::vector<char>>>;

struct HeadHello {
  std::string head;              // how the head names itself in logs: "serve on host 1.2.3.4"
  std::string worker;            // the worker as the head addresses it: "host:port"
  Fingerprint fingerprint;       // the head's (see fingerprint.hpp)
};

struct WorkerHello {
  std::string refusal;           // empty: accepted; else why not (both sides named)
  std::string description;       // the worker's backend, one line
  std::string memory;            // one rank's memory, one line
};

struct HostRanks {
  std::string head;                  // HeadHello::head
  std::vector<std::uint32_t> ranks;  // this worker's, ascending
  std::uint32_t world = 0;           // engine.world_size()
  store_actor store;                 // where the group's data plane meets (the head's)
};

// "0, 1, 2": ranks in logs and messages.
inline std::string ranks_text(const std::vector<std::uint32_t>& ranks) {
  std::string out;
  for (auto r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

using worker_actor =
    caf::typed_actor<caf::replies_to<hello_atom, HeadHello>::with<WorkerHello>,
                     caf::replies_to<host_atom, HostRanks>::with<std::vector<shard::shard_actor>>>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FingerprintItem& x) {
  return f(caf::meta::type_name("FingerprintItem"), x.key, x.value);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, HeadHello& x) {
  return f(caf::meta::type_name("HeadHello"), x.head, x.worker, x.fingerprint);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkerHello& x) {
  return f(caf::meta::type_name("WorkerHello"), x.refusal, x.description, x.memory);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, HostRanks& x) {
  return f(caf::meta::type_name("HostRanks"), x.head, x.ranks, x.world, x.store);
}

// Registers the cluster's message types; call on every node's actor_system_config (with the
// engine's: serving::register_engine_types).
inline void add_cluster_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<HeadHello>("actorlm::cluster::HeadHello");
  cfg.add_message_type<WorkerHello>("actorlm::cluster::WorkerHello");
  cfg.add_message_type<HostRanks>("actorlm::cluster::HostRanks");
  cfg.add_message_type<std::vector<shard::shard_actor>>("std::vector<actorlm::shard::shard_actor>");
  cfg.add_message_type<store_actor>("actorlm::cluster::store_actor");
}

}  // namespace actorlm::cluster
