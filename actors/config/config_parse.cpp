// parse_config and load_config: the schema of each section (names, types, ranges), the sections
// themselves, and the rules that span several keys. Per-value checks live in TableReader.
#include "actors/config/config.hpp"
#include "actors/config/table_reader.hpp"
#include "actors/config/toml_parse.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

namespace actorlm::config {
namespace {

using detail::ErrorList;
using detail::Position;
using detail::TableReader;

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
constexpr double unbounded = std::numeric_limits<double>::infinity();

constexpr std::array<std::string_view, 7> section_names = {
    "server", "engine", "cache", "scheduler", "model", "sim", "cluster"};

// "host:port" with a non-empty host and a port in [1, 65535]; the last ':' splits, so a
// bracketed IPv6 address ("[::1]:8000") works too.
bool is_host_port(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view port = text.substr(colon + 1);
  int value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  return ec == std::errc{} && end == port.data() + port.size() && port.front() != '+' &&
         value >= 1 && value <= 65535;
}

void read_server(TableReader& r, ServerConfig& c) {
  r.non_empty_string("host", c.host, "a host name or address");
  r.integer("port", c.port, {0, 65535});
  r.string("api_key", c.api_key);
  r.integer("max_body_bytes", c.max_body_bytes, {1 << 10, 1 << 30});
  r.number("drain_timeout_s", c.drain_timeout_s, {0, 3600});
  r.boolean("log_prompts", c.log_prompts);
  r.integer("io_threads", c.io_threads, {1, 64});
  r.integer("max_connections", c.max_connections, {1, 1000000});
  r.number("header_timeout_s", c.header_timeout_s, {0, 3600, /*lo_open=*/true});
  r.number("body_timeout_s", c.body_timeout_s, {0, 3600, /*lo_open=*/true});
  r.number("keep_alive_timeout_s", c.keep_alive_timeout_s, {0, 3600, /*lo_open=*/true});
  r.number("write_timeout_s", c.write_timeout_s, {0, 3600, /*lo_open=*/true});
}

void read_engine(TableReader& r, EngineConfig& c) {
  r.choice("backend", c.backend, {Backend::sim, Backend::cpu, Backend::cuda});
  r.integer("tensor_parallel_degree", c.tensor_parallel_degree, {1, 64});  // any: cpu TP 3 for 9 heads
  r.integer("pipeline_parallel_degree", c.pipeline_parallel_degree, {1, 64});
  r.choice("batching", c.batching, {Batching::dynamic, Batching::continuous, Batching::paged});
  r.integer("seed", c.seed, {0, int64_max});
  r.number("step_timeout_s", c.step_timeout_s, {0, 86400, /*lo_open=*/true});
  r.integer_array("devices", c.devices, {0, 1023});
  r.boolean("cuda_graphs", c.cuda_graphs);
}

void read_cache(TableReader& r, CacheConfig& c) {
  r.integer("block_size", c.block_size, {1, 256, /*power_of_two=*/true});
  r.number("gpu_memory_utilization", c.gpu_memory_utilization, {0, 1, /*lo_open=*/true});
  r.number("swap_space", c.swap_space, {0, unbounded});
  r.number("cpu_kv_space", c.cpu_kv_space, {0, unbounded});
  r.boolean("prefix_caching", c.prefix_caching);
  r.number("watermark", c.watermark, {0, 0.5, false, /*hi_open=*/true});
  r.integer("num_gpu_blocks_override", c.num_gpu_blocks_override, {0, int64_max});
  r.choice("dtype", c.dtype, {CacheDtype::f16, CacheDtype::f32});
}

void read_scheduler(TableReader& r, SchedulerConfig& c) {
  r.integer("max_num_seqs", c.max_num_seqs, {1, 65536});
  r.integer("max_num_batched_tokens", c.max_num_batched_tokens, {1, 1 << 24});
  r.number("max_batch_delay_ms", c.max_batch_delay_ms, {0, 60000});
  r.integer("batch_size", c.batch_size, {1, 4096});
  r.boolean("chunked_prefill", c.chunked_prefill);
  r.choice("preemption", c.preemption,
           {Preemption::recompute, Preemption::swap, Preemption::automatic});
  r.integer("max_queue_len", c.max_queue_len, {1, 1 << 24});
  r.number("priority_aging_per_s", c.priority_aging_per_s, {0, 1e6});
}

void read_model(TableReader& r, ModelConfig& c) {
  r.string("name", c.name);
  r.string("path", c.path);
  r.string("preset", c.preset);
  r.integer("max_model_len", c.max_model_len, {1, 1 << 20});
  r.choice("weights", c.weights, {CpuWeights::stored, CpuWeights::f32});
}

void read_sim(TableReader& r, SimConfig& c) {
  r.string("hardware", c.hardware);
  r.string("instance", c.instance);
  r.choice("clock", c.clock, {SimClock::virtual_time, SimClock::wall});
  r.integer("seed", c.seed, {0, int64_max});
  r.choice("parallelism", c.parallelism, {SimParallelism::tensor, SimParallelism::layers});
  r.integer("nodes", c.nodes, {1, 64});
  r.string("hardware_catalogue", c.hardware_catalogue);
  r.string("model_catalogue", c.model_catalogue);
  r.choice("fault", c.fault, {SimFault::none, SimFault::error, SimFault::hang, SimFault::exit});
  r.integer("fault_step", c.fault_step, {1, int64_max});
  r.integer("fault_rank", c.fault_rank, {0, 63});
}

void read_cluster(TableReader& r, ClusterConfig& c) {
  r.string_array("workers", c.workers, [](std::string_view w) { return w == head_worker || is_host_port(w); },
                 "\"host:port\" with port in [1, 65535], or \"head\" (this process)");
  r.integer_array("placement", c.placement, {0, 1023});
  r.string("tls_cert", c.tls_cert);
  r.string("tls_key", c.tls_key);
  r.string("tls_ca", c.tls_ca);
  r.boolean("insecure", c.insecure);
  r.string("head_data_address", c.head_data_address);
  r.number("connect_timeout_s", c.connect_timeout_s, {0, 3600, /*lo_open=*/true});
  r.number("heartbeat_interval_s", c.heartbeat_interval_s, {0.01, 60});
}

// One reader per section, kept after reading so cross-field rules can find positions.
struct Sections {
  TableReader server, engine, cache, scheduler, model, sim, cluster;
};

const toml::table* section_table(const toml::table& root, std::string_view name, ErrorList& errors) {
  const toml::node* node = root.get(name);
  if (node == nullptr) return nullptr;
  if (const toml::table* table = node->as_table()) return table;
  errors.add(detail::position_of(*node), std::string(name),
             "expected a table (section [" + std::string(name) + "]), found " + detail::describe(*node));
  return nullptr;
}

void report_unknown_sections(const toml::table& root, ErrorList& errors) {
  for (const auto& [key, node] : root) {
    const std::string_view name = key.str();
    if (std::find(section_names.begin(), section_names.end(), name) != section_names.end()) continue;
    const auto suggestion = detail::closest_match(name, section_names);
    std::string message;
    if (node.is_table()) {
      message = "unknown section [" + std::string(name) + "]; ";
      message += suggestion ? "did you mean [" + std::string(*suggestion) + "]?"
                            : std::string("known sections are: [server], [engine], [cache], "
                                          "[scheduler], [model], [sim], [cluster]");
    } else {
      message = "unknown top-level key; settings belong in a section ([server], [engine], "
                "[cache], [scheduler], [model], [sim], [cluster])";
    }
    errors.add(detail::position_of(key), std::string(name), std::move(message));
  }
}

struct KeyRef {
  const TableReader& reader;
  std::string_view key;
};

// Reports a rule that spans `keys` at the one written last in the file (where the conflict
// becomes visible); when none is written, at the first of their sections that is.
void add_cross_field_error(ErrorList& errors, std::initializer_list<KeyRef> keys,
                           std::string message) {
  std::optional<Position> where;
  std::string path;
  for (const KeyRef& ref : keys) {
    const auto position = ref.reader.position(ref.key);
    if (position && (!where || *where < *position)) {
      where = position;
      path = ref.reader.path(ref.key);
    }
  }
  for (auto it = keys.begin(); !where && it != keys.end(); ++it) {
    where = it->reader.section_position();
  }
  if (path.empty()) path = keys.begin()->reader.path(keys.begin()->key);
  errors.add(where.value_or(Position{}), std::move(path), std::move(message));
}

bool degrees_valid(const Sections& s) {
  return s.engine.valid("tensor_parallel_degree") && s.engine.valid("pipeline_parallel_degree");
}

// sim.fault_rank names an existing rank, and only rank 0's answer is awaited: an "error" or a
// "hang" elsewhere would go unnoticed.
void check_sim_fault(const Config& c, const Sections& s, ErrorList& errors) {
  if (!s.sim.valid("fault") || !s.sim.valid("fault_rank") || c.sim.fault == SimFault::none) return;
  const std::string rank = std::to_string(c.sim.fault_rank);
  if (degrees_valid(s) && c.sim.fault_rank >= c.engine.world_size())
    add_cross_field_error(errors, {{s.sim, "fault_rank"}, {s.engine, "tensor_parallel_degree"}},
                          "sim.fault_rank (" + rank + ") must be below " + c.engine.world_size_keys() + " (" +
                              std::to_string(c.engine.world_size()) + ")");
  else if (c.sim.fault_rank != 0 && c.sim.fault != SimFault::exit)
    add_cross_field_error(errors, {{s.sim, "fault_rank"}, {s.sim, "fault"}},
                          "sim.fault = \"" + std::string(to_string(c.sim.fault)) + "\" needs sim.fault_rank = 0 (found " +
                              rank + "): the scheduler awaits only rank 0's answer, so a fault of rank " + rank +
                              " would go unnoticed; use \"exit\" to stop another rank");
}

// sim.nodes spreads the GPUs equally over instances, and an instance's network is the catalogue's.
void check_sim_nodes(const Config& c, const Sections& s, ErrorList& errors) {
  if (!s.sim.valid("nodes") || c.sim.nodes == 1) return;
  const std::string n = std::to_string(c.sim.nodes);
  if (degrees_valid(s) && c.engine.world_size() % c.sim.nodes != 0)
    add_cross_field_error(errors, {{s.sim, "nodes"}, {s.engine, "tensor_parallel_degree"}},
                          "sim.nodes (" + n + ") must divide " + c.engine.world_size_keys() + " (" + std::to_string(c.engine.world_size()) +
                              "): every node holds as many GPUs");
  else if (s.sim.valid("instance") && c.sim.instance.empty())
    add_cross_field_error(errors, {{s.sim, "nodes"}, {s.sim, "instance"}},
                          "sim.nodes = " + n + " needs sim.instance: the network between nodes is the instance's");
}

// engine.devices: the cuda backend's, one GPU per rank, none twice, no more than there are ranks.
// Which ranks a process hosts is known only when it loads them (a worker's config does not say;
// a head may host none), so that is where a list is checked for exactly one GPU per rank.
void check_devices(const Config& c, const Sections& s, ErrorList& errors) {
  if (s.engine.valid("cuda_graphs") && c.engine.cuda_graphs && s.engine.valid("backend") &&
      c.engine.backend != Backend::cuda)
    add_cross_field_error(errors, {{s.engine, "cuda_graphs"}, {s.engine, "backend"}},
                          "engine.cuda_graphs replays the cuda backend's decode steps; engine.backend is \"" +
                              std::string(to_string(c.engine.backend)) + "\"");
  const auto& d = c.engine.devices;
  if (!s.engine.valid("devices") || d.empty()) return;
  if (s.engine.valid("backend") && c.engine.backend != Backend::cuda) {
    add_cross_field_error(errors, {{s.engine, "devices"}, {s.engine, "backend"}},
                          "engine.devices picks GPUs for the cuda backend; engine.backend is \"" +
                              std::string(to_string(c.engine.backend)) + "\"");
    return;
  }
  for (std::size_t i = 0; i < d.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (d[i] == d[j]) {
        errors.add(s.engine.position("devices").value_or(Position{}), s.engine.path("devices"),
                   "GPU " + std::to_string(d[i]) + " is listed twice (entries " + std::to_string(j) + " and " +
                       std::to_string(i) + "): each rank needs a GPU of its own");
        return;
      }
  if (degrees_valid(s) && std::int64_t(d.size()) > c.engine.world_size())
    add_cross_field_error(errors, {{s.engine, "devices"}, {s.engine, "tensor_parallel_degree"}},
                          "engine.devices lists " + std::to_string(d.size()) + " GPUs, more than there are ranks (" +
                              c.engine.world_size_keys() + " = " + std::to_string(c.engine.world_size()) + ")");
}

// Placement names a worker per rank and leaves none idle; TLS files come together; plaintext
// leaves the machine only when asked for; a cluster serves in wall-clock time.
void check_cluster(const Config& c, const Sections& s, ErrorList& errors) {
  const auto& k = c.cluster;
  if (!s.cluster.valid("workers") || !s.cluster.valid("placement") || !degrees_valid(s)) return;
  const auto tp = c.engine.world_size();
  const std::string n = std::to_string(k.workers.size());
  if (!k.placement.empty()) {
    if (k.workers.empty())
      add_cross_field_error(errors, {{s.cluster, "placement"}, {s.cluster, "workers"}},
                            "cluster.placement is set but cluster.workers is empty");
    else if (std::int64_t(k.placement.size()) != tp)
      add_cross_field_error(errors, {{s.cluster, "placement"}, {s.engine, "tensor_parallel_degree"}},
                            "cluster.placement has " + std::to_string(k.placement.size()) +
                                " entries; it needs one per rank (" + c.engine.world_size_keys() + " = " + std::to_string(tp) + ")");
    else if (auto bad = std::find_if(k.placement.begin(), k.placement.end(),
                                     [&](std::int64_t w) { return w >= std::int64_t(k.workers.size()); });
             bad != k.placement.end())
      add_cross_field_error(errors, {{s.cluster, "placement"}, {s.cluster, "workers"}},
                            "cluster.placement[" + std::to_string(bad - k.placement.begin()) + "] = " + std::to_string(*bad) +
                                " names no worker (cluster.workers has " + n + ", indices 0 to " +
                                std::to_string(k.workers.size() - 1) + ")");
    else
      for (std::size_t w = 0; w < k.workers.size(); ++w)
        if (std::find(k.placement.begin(), k.placement.end(), std::int64_t(w)) == k.placement.end()) {
          add_cross_field_error(errors, {{s.cluster, "placement"}, {s.cluster, "workers"}},
                                "cluster.placement gives worker " + std::to_string(w) + " (" + k.workers[w] +
                                    ") no rank; every worker in cluster.workers must host one");
          break;
        }
  } else if (std::int64_t(k.workers.size()) > tp) {
    add_cross_field_error(errors, {{s.cluster, "workers"}, {s.engine, "tensor_parallel_degree"}},
                          "cluster.workers names " + n + " workers but " + c.engine.world_size_keys() + " = " + std::to_string(tp) +
                              " gives only " + std::to_string(tp) + " ranks to place");
  }
  const auto heads = std::count(k.workers.begin(), k.workers.end(), head_worker);
  if (heads > 1)
    add_cross_field_error(errors, {{s.cluster, "workers"}},
                          "cluster.workers names \"head\" " + std::to_string(heads) + " times; the head is one process: "
                          "name it once and give it more ranks with cluster.placement");
  // The first worker on another machine ("head" and loopback addresses stay on this one).
  const auto off_machine = std::find_if(k.workers.begin(), k.workers.end(), [](const std::string& w) {
    std::string host;
    std::uint16_t port = 0;
    return split_host_port(w, host, port) && !is_loopback_host(host);
  });
  const bool all_loopback = off_machine == k.workers.end();
  if (heads > 0 && k.head_data_address.empty() && !all_loopback)
    add_cross_field_error(errors, {{s.cluster, "workers"}, {s.cluster, "head_data_address"}},
                          "cluster.workers puts ranks on the head and on other machines: set "
                          "cluster.head_data_address to this machine's address that the workers reach");
  const std::string& hda = k.head_data_address;
  if (heads > 0 && !hda.empty() && is_unspecified_host(hda))  // empty: the 127.0.0.1 default
    add_cross_field_error(errors, {{s.cluster, "head_data_address"}},
                          "cluster.head_data_address = \"" + hda +
                              "\" names no single address: give the one the workers reach this machine at");
  else if (heads > 0 && !hda.empty() && !all_loopback && is_loopback_host(hda))
    add_cross_field_error(errors, {{s.cluster, "head_data_address"}, {s.cluster, "workers"}},
                          "cluster.head_data_address = \"" + hda +
                              "\" is a loopback address, which the workers on other machines cannot reach");
  if (heads == 0 && !k.head_data_address.empty())
    add_cross_field_error(errors, {{s.cluster, "head_data_address"}, {s.cluster, "workers"}},
                          "cluster.head_data_address is set but cluster.workers does not name \"head\"");
  const int tls_files = int(!k.tls_cert.empty()) + int(!k.tls_key.empty()) + int(!k.tls_ca.empty());
  if (tls_files != 0 && tls_files != 3)
    add_cross_field_error(errors, {{s.cluster, "tls_cert"}, {s.cluster, "tls_key"}, {s.cluster, "tls_ca"}},
                          "cluster.tls_cert, tls_key and tls_ca go together: set all three (mutual TLS) or none");
  if (tls_files == 3 && k.insecure)
    add_cross_field_error(errors, {{s.cluster, "insecure"}, {s.cluster, "tls_cert"}},
                          "cluster.insecure = true contradicts the TLS files set: remove one or the other");
  if (tls_files == 0 && !k.insecure && !all_loopback)
    add_cross_field_error(errors, {{s.cluster, "workers"}, {s.cluster, "tls_cert"}},
                          "cluster.workers[" + std::to_string(off_machine - k.workers.begin()) + "] = \"" + *off_machine +
                              "\" is not on this machine, and the cluster has no TLS: set cluster.tls_cert, "
                              "tls_key and tls_ca (tools/cluster/make_certs.sh makes them), or cluster.insecure = true");
  if (!k.workers.empty() && s.engine.valid("backend") && s.sim.valid("clock") && c.engine.backend == Backend::sim &&
      c.sim.clock == SimClock::virtual_time)
    add_cross_field_error(errors, {{s.cluster, "workers"}, {s.sim, "clock"}},
                          "sim shards on cluster workers run in wall-clock time: set sim.clock = \"wall\"");
}

void check_cross_field_rules(const Config& c, const Sections& s, ErrorList& errors) {
  const auto& sched = c.scheduler;
  if (s.scheduler.valid("max_num_batched_tokens") && s.scheduler.valid("max_num_seqs") &&
      sched.max_num_batched_tokens < sched.max_num_seqs) {
    add_cross_field_error(
        errors, {{s.scheduler, "max_num_batched_tokens"}, {s.scheduler, "max_num_seqs"}},
        "scheduler.max_num_batched_tokens (" + std::to_string(sched.max_num_batched_tokens) +
            ") must be at least scheduler.max_num_seqs (" + std::to_string(sched.max_num_seqs) +
            "): every running sequence needs a token in each step");
  }
  if (s.scheduler.valid("max_num_batched_tokens") && s.model.valid("max_model_len") &&
      s.scheduler.valid("chunked_prefill") && !sched.chunked_prefill &&
      sched.max_num_batched_tokens < c.model.max_model_len) {
    add_cross_field_error(
        errors,
        {{s.scheduler, "max_num_batched_tokens"}, {s.model, "max_model_len"},
         {s.scheduler, "chunked_prefill"}},
        "scheduler.max_num_batched_tokens (" + std::to_string(sched.max_num_batched_tokens) +
            ") is less than model.max_model_len (" + std::to_string(c.model.max_model_len) +
            "), so a full-length prompt could never be scheduled; raise it or set "
            "scheduler.chunked_prefill = true");
  }
  if (s.engine.valid("backend") && s.model.valid("preset") && c.engine.backend == Backend::sim &&
      c.model.preset.empty()) {
    add_cross_field_error(errors, {{s.engine, "backend"}, {s.model, "preset"}},
                          "engine.backend = \"sim\" requires model.preset (a simulator catalogue "
                          "entry, e.g. \"falcon-40b\"), which is empty");
  }
  check_sim_fault(c, s, errors);
  check_sim_nodes(c, s, errors);
  check_cluster(c, s, errors);
  check_devices(c, s, errors);
}

}  // namespace

std::string head_data_address(const ClusterConfig& c) {
  return c.head_data_address.empty() ? "127.0.0.1" : c.head_data_address;
}

std::vector<std::uint32_t> worker_of_rank(const ClusterConfig& c, std::int64_t world_size) {
  std::vector<std::uint32_t> out;
  if (c.workers.empty()) return out;
  const std::int64_t n = std::int64_t(c.workers.size());
  for (std::int64_t r = 0; r < world_size; ++r) {
    if (!c.placement.empty()) {
      out.push_back(static_cast<std::uint32_t>(c.placement.at(std::size_t(r))));
      continue;
    }
    // Worker i hosts [i * ranks / n, (i + 1) * ranks / n): the largest i with i * ranks / n <= r.
    std::int64_t w = 0;
    while (w + 1 < n && (w + 1) * world_size / n <= r) ++w;
    out.push_back(static_cast<std::uint32_t>(w));
  }
  return out;
}

bool split_host_port(std::string_view text, std::string& host, std::uint16_t& port) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view digits = text.substr(colon + 1);
  int value = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size() || digits.empty() || digits.front() == '+' ||
      value < 0 || value > 65535)
    return false;
  std::string_view h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  host.assign(h);
  port = static_cast<std::uint16_t>(value);
  return true;
}

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host.substr(0, 4) == "127.";
}

bool is_unspecified_host(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

ParseResult parse_config(std::string_view toml_text, std::string_view file) {
  ParseResult result;
  ErrorList errors{file};
  toml::table root;
  try {
    root = detail::parse_toml(toml_text, file);  // toml::parse, without toml++ 3.3.0's UB
  } catch (const toml::parse_error& e) {
    errors.add({e.source().begin.line, e.source().begin.column}, "", std::string(e.description()));
    result.errors = errors.take_sorted();
    return result;
  }

  Config& c = result.config;
  Sections s{
      {"server", section_table(root, "server", errors), errors},
      {"engine", section_table(root, "engine", errors), errors},
      {"cache", section_table(root, "cache", errors), errors},
      {"scheduler", section_table(root, "scheduler", errors), errors},
      {"model", section_table(root, "model", errors), errors},
      {"sim", section_table(root, "sim", errors), errors},
      {"cluster", section_table(root, "cluster", errors), errors},
  };
  read_server(s.server, c.server);
  read_engine(s.engine, c.engine);
  read_cache(s.cache, c.cache);
  read_scheduler(s.scheduler, c.scheduler);
  read_model(s.model, c.model);
  read_sim(s.sim, c.sim);
  read_cluster(s.cluster, c.cluster);
  for (TableReader* r : {&s.server, &s.engine, &s.cache, &s.scheduler, &s.model, &s.sim, &s.cluster}) {
    r->report_unknown_keys();
  }
  report_unknown_sections(root, errors);
  check_cross_field_rules(c, s, errors);

  result.errors = errors.take_sorted();
  if (!result.ok()) result.config = Config{};  // never a half-validated config
  return result;
}

ParseResult load_config(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{std::fopen(path.c_str(), "rb"), &std::fclose};
  std::string text;
  int error = file ? 0 : errno;
  if (file) {
    char buffer[1 << 16];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, n);
    if (std::ferror(file.get())) error = errno;  // e.g. EISDIR: fopen accepts a directory
  }
  if (error != 0) {
    ParseResult result;
    result.errors.push_back({path, 0, 0, "", "cannot read config file: " + std::string(std::strerror(error))});
    return result;
  }
  return parse_config(text, path);
}

}  // namespace actorlm::config
