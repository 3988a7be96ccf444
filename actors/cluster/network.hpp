#pragma once
// CAF's network layer for a cluster: the head and its workers load the middleman (and, with the
// cluster's TLS files, the OpenSSL module: mutual TLS, every peer's certificate signed by the
// cluster CA), with heartbeats so that a silent peer counts as lost, and reach each other only
// through the two calls here.

#include "actors/config/config.hpp"

#include <chrono>
#include <cstdint>
#include <string>

namespace caf {
class actor_system;
class actor_system_config;
}  // namespace caf

namespace actorlm::cluster {

// Call before the actor system is built from `cfg`. Checks that the TLS files can be read
// (std::invalid_argument naming the key and the file otherwise: CAF would fail later without
// saying why).
void configure_network(caf::actor_system_config& cfg, const config::ClusterConfig& cluster);

}  // namespace actorlm::cluster
