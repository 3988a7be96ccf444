// to_toml: the effective configuration written back as TOML, by hand so that keys keep the
// schema's order (toml++ tables are sorted by key).
#include "actors/config/config.hpp"
#include "actors/config/format.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace actorlm::config {
namespace detail {

std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (byte < 0x20 || byte == 0x7f) {  // TOML forbids raw control characters in strings
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04X", static_cast<unsigned>(byte));
          out += escape;
        } else {
          out += ch;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
  return out;
}

std::string shortest(double value) {
  char buffer[64];
  // Whole numbers read better without an exponent ("1000000", not "1e+06").
  const bool whole = std::isfinite(value) && std::fabs(value) < 1e15 && value == std::trunc(value);
  const auto result = whole ? std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed)
                            : std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string toml_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string out = shortest(value);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

}  // namespace detail

namespace {

// Appends `key = value` lines; one overload per TOML type the schema uses.
class TomlWriter {
 public:
  explicit TomlWriter(std::string& out) : out_(out) {}

  void section(std::string_view name) {
    out_ += "\n[";
    out_ += name;
    out_ += "]\n";
  }
  void entry(std::string_view key, std::string_view value) { line(key, detail::quoted(value)); }
  void entry(std::string_view key, std::int64_t value) { line(key, std::to_string(value)); }
  void entry(std::string_view key, double value) { line(key, detail::toml_float(value)); }
  void entry(std::string_view key, bool value) { line(key, value ? "true" : "false"); }
  void entry(std::string_view key, const std::vector<std::string>& values) {
    std::string text = "[";
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) text += ", ";
      text += detail::quoted(values[i]);
    }
    text += ']';
    line(key, text);
  }
  void entry(std::string_view key, const std::vector<std::int64_t>& values) {
    std::string text = "[";
    for (std::size_t i = 0; i < values.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(values[i]);
    text += ']';
    line(key, text);
  }

 private:
  void line(std::string_view key, std::string_view value) {
    out_ += key;
    out_ += " = ";
    out_ += value;
    out_ += '\n';
  }
  std::string& out_;
};

}  // namespace

std::string to_toml(const Config& c) {
  std::string out = "# Effective actorlm configuration: every key, defaults filled in.\n";
  TomlWriter w{out};

  w.section("server");
  w.entry("host", c.server.host);
  w.entry("port", c.server.port);
  w.entry("api_key", c.server.api_key);
  w.entry("max_body_bytes", c.server.max_body_bytes);
  w.entry("drain_timeout_s", c.server.drain_timeout_s);
  w.entry("log_prompts", c.server.log_prompts);
  w.entry("io_threads", c.server.io_threads);
  w.entry("max_connections", c.server.max_connections);
  w.entry("header_timeout_s", c.server.header_timeout_s);
  w.entry("body_timeout_s", c.server.body_timeout_s);
  w.entry("keep_alive_timeout_s", c.server.keep_alive_timeout_s);
  w.entry("write_timeout_s", c.server.write_timeout_s);

  w.section("engine");
  w.entry("backend", to_string(c.engine.backend));
  w.entry("tensor_parallel_degree", c.engine.tensor_parallel_degree);
  w.entry("pipeline_parallel_degree", c.engine.pipeline_parallel_degree);
  w.entry("devices", c.engine.devices);
  w.entry("cuda_graphs", c.engine.cuda_graphs);
  w.entry("batching", to_string(c.engine.batching));
  w.entry("seed", c.engine.seed);
  w.entry("step_timeout_s", c.engine.step_timeout_s);

  w.section("cache");
  w.entry("block_size", c.cache.block_size);
  w.entry("gpu_memory_utilization", c.cache.gpu_memory_utilization);
  w.entry("swap_space", c.cache.swap_space);
  w.entry("cpu_kv_space", c.cache.cpu_kv_space);
  w.entry("prefix_caching", c.cache.prefix_caching);
  w.entry("watermark", c.cache.watermark);
  w.entry("num_gpu_blocks_override", c.cache.num_gpu_blocks_override);
  w.entry("dtype", to_string(c.cache.dtype));

  w.section("scheduler");
  w.entry("max_num_seqs", c.scheduler.max_num_seqs);
  w.entry("max_num_batched_tokens", c.scheduler.max_num_batched_tokens);
  w.entry("max_batch_delay_ms", c.scheduler.max_batch_delay_ms);
  w.entry("batch_size", c.scheduler.batch_size);
  w.entry("chunked_prefill", c.scheduler.chunked_prefill);
  w.entry("preemption", to_string(c.scheduler.preemption));
  w.entry("max_queue_len", c.scheduler.max_queue_len);
  w.entry("priority_aging_per_s", c.scheduler.priority_aging_per_s);

  w.section("model");
  w.entry("name", c.model.name);
  w.entry("path", c.model.path);
  w.entry("preset", c.model.preset);
  w.entry("max_model_len", c.model.max_model_len);
  w.entry("weights", to_string(c.model.weights));

  w.section("sim");
  w.entry("hardware", c.sim.hardware);
  w.entry("instance", c.sim.instance);
  w.entry("clock", to_string(c.sim.clock));
  w.entry("seed", c.sim.seed);
  w.entry("parallelism", to_string(c.sim.parallelism));
  w.entry("nodes", c.sim.nodes);
  w.entry("hardware_catalogue", c.sim.hardware_catalogue);
  w.entry("model_catalogue", c.sim.model_catalogue);
  w.entry("fault", to_string(c.sim.fault));
  w.entry("fault_step", c.sim.fault_step);
  w.entry("fault_rank", c.sim.fault_rank);

  w.section("cluster");
  w.entry("workers", c.cluster.workers);
  w.entry("placement", c.cluster.placement);
  w.entry("tls_cert", c.cluster.tls_cert);
  w.entry("tls_key", c.cluster.tls_key);
  w.entry("tls_ca", c.cluster.tls_ca);
  w.entry("insecure", c.cluster.insecure);
  w.entry("head_data_address", c.cluster.head_data_address);
  w.entry("connect_timeout_s", c.cluster.connect_timeout_s);
  w.entry("heartbeat_interval_s", c.cluster.heartbeat_interval_s);
  return out;
}

}  // namespace actorlm::config
