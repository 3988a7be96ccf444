#pragma once
// What a cluster's head and its workers must agree on before a worker hosts the head's ranks:
// the configuration keys that change what a shard computes or how the KV cache is laid out, and
// the backend's identity (e.g. the model file's name and size). No CAF.

#include "actors/config/config.hpp"

#include <string>
#include <vector>

namespace actorlm::cluster {

struct FingerprintItem {
  std::string key;    // "engine.tensor_parallel_degree", "model.file"
  std::string value;  // as written in TOML, or the backend's identity
  bool operator==(const FingerprintItem&) const = default;
};

using Fingerprint = std::vector<FingerprintItem>;

// The items of `cfg` in a fixed order; `identity` is serving::Backend::identity.
Fingerprint fingerprint(const config::Config& cfg, const std::string& identity);

// Empty when they agree; else one clause per differing key, naming both sides:
// "engine.tensor_parallel_degree is 2 on the head (h:1) but 3 on the worker (w:2)".
std::string compare(const Fingerprint& head, const std::string& head_name, const Fingerprint& worker,
                    const std::string& worker_name);

}  // namespace actorlm::cluster
