#include "actors/cluster/network.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/timespan.hpp>

#include <fstream>
#include <stdexcept>

namespace actorlm::cluster {

namespace {

void check_readable(const std::string& key, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cluster." + key + " = \"" + path + "\": cannot read the file");
  std::string first;
  std::getline(in, first);
  if (first.rfind("-----BEGIN ", 0) != 0)
    throw std::invalid_argument("cluster." + key + " = \"" + path + "\": not a PEM file (no -----BEGIN line)");
}

}  // namespace

void configure_network(caf::actor_system_config& cfg, const config::ClusterConfig& c) {
  cfg.load<caf::io::middleman>();
  // Both ends send a heartbeat every interval and drop a connection silent for four.
  const auto interval = std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(c.heartbeat_interval_s));
  cfg.set("middleman.heartbeat-interval", interval);
  cfg.set("middleman.connection-timeout", interval * 4);
  if (!c.tls()) return;
  check_readable("tls_cert", c.tls_cert);
  check_readable("tls_key", c.tls_key);
  check_readable("tls_ca", c.tls_ca);
  cfg.load<caf::openssl::manager>();
  cfg.openssl_certificate = c.tls_cert;
  cfg.openssl_key = c.tls_key;
  cfg.openssl_cafile = c.tls_ca;
}

}  // namespace actorlm::cluster
