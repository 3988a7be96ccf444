#include "actors/cluster/fingerprint.hpp"

#include "actors/shard/wire_format.hpp"

#include <cstdio>
#include <map>

namespace actorlm::cluster {

namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace

Fingerprint fingerprint(const config::Config& c, const std::string& identity) {
  // Scheduling keys (batching, max_num_seqs...) live on the head only; these decide what a
  // shard computes, the cache geometry it is handed, and how the two ends watch each other.
  return {
      {"engine.backend", std::string(config::to_string(c.engine.backend))},
      {"engine.tensor_parallel_degree", std::to_string(c.engine.tensor_parallel_degree)},
      {"engine.pipeline_parallel_degree", std::to_string(c.engine.pipeline_parallel_degree)},
      {"model (the backend's identity)", identity},
      {"model.weights", std::string(config::to_string(c.model.weights))},
      {"model.max_model_len", std::to_string(c.model.max_model_len)},
      {"cache.block_size", std::to_string(c.cache.block_size)},
      {"cache.dtype", std::string(config::to_string(c.cache.dtype))},
      {"cache.cpu_kv_space", number(c.cache.cpu_kv_space)},
      {"cache.swap_space", number(c.cache.swap_space)},
      {"cache.gpu_memory_utilization", number(c.cache.gpu_memory_utilization)},
      {"cache.num_gpu_blocks_override", std::to_string(c.cache.num_gpu_blocks_override)},
      {"sim.seed", std::to_string(c.sim.seed)},
      {"sim.fault", std::string(config::to_string(c.sim.fault))},
      {"cluster.heartbeat_interval_s", number(c.cluster.heartbeat_interval_s)},
      {"cluster.tls", c.cluster.tls() ? "on" : "off"},
      {"shard wire format", shard::wire_format_version()},
  };
}

std::string compare(const Fingerprint& head, const std::string& head_name, const Fingerprint& worker,
                    const std::string& worker_name) {
  std::map<std::string, std::string> theirs;
  for (const auto& i : worker) theirs[i.key] = i.value;
  std::string out;
  const auto clause = [&](const std::string& key, const std::string& a, const std::string& b) {
    out += (out.empty() ? "" : "; ") + key + " is \"" + a + "\" on the head (" + head_name + ") but \"" + b +
           "\" on the worker (" + worker_name + ")";
  };
  for (const auto& i : head) {
    const auto it = theirs.find(i.key);
    if (it == theirs.end()) clause(i.key, i.value, "(absent: another actorlm version?)");
    else if (it->second != i.value) clause(i.key, i.value, it->second);
  }
  return out;
}

}  // namespace actorlm::cluster
