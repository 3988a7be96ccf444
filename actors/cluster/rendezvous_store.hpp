#pragma once
// The data plane's rendezvous across processes: the head spawns a store actor per group and
// hands it to its workers; each worker's ranks reach it through a kernels::RendezvousStore that
// sends blocking requests (it runs on the ranks' join threads, never on an actor).

#include "actors/cluster/cluster_protocol.hpp"
#include "kernels/rendezvous_store.hpp"

#include <memory>

namespace caf { class actor_system; }

namespace actorlm::cluster {

// A map of key to bytes; a get of a key not set yet is answered when it is set.
store_actor spawn_rendezvous_store(caf::actor_system& sys);

// The store seen from a worker's ranks. get() waits up to its timeout and then throws
// std::runtime_error naming the key; a store that is gone throws at once.
std::shared_ptr<kernels::RendezvousStore> remote_store(caf::actor_system& sys, store_actor store);

}  // namespace actorlm::cluster
