#pragma once
// The whole product's configuration: one TOML file parsed once (toml++) into these plain structs.
// Every field has a default; `actorlm config show FILE` prints the effective values.
// Validation (types, ranges, unknown keys, cross-field rules) happens in parse_config, and
// nowhere else: actors receive their sub-struct by value and may trust it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::config {

enum class Backend { sim, cpu, cuda };
enum class Batching { dynamic, continuous, paged };
enum class Preemption { recompute, swap, automatic };  // TOML: "recompute" | "swap" | "auto"
enum class SimClock { virtual_time, wall };            // TOML: "virtual" | "wall"
enum class SimParallelism { tensor, layers };          // TOML: "tensor" | "layers"
enum class SimFault { none, error, hang, exit };       // TOML: "none" | "error" | "hang" | "exit"
enum class CpuWeights { stored, f32 };                 // TOML: "stored" | "f32"
enum class CacheDtype { f16, f32 };                    // TOML: "f16" | "f32"

std::string_view to_string(Backend);
std::string_view to_string(Batching);
std::string_view to_string(Preemption);
std::string_view to_string(SimClock);
std::string_view to_string(SimParallelism);
std::string_view to_string(SimFault);
std::string_view to_string(CpuWeights);
std::string_view to_string(CacheDtype);

// [server]: the HTTP daemon (actorlm serve).
struct ServerConfig {
  std::string host = "127.0.0.1";      // loopback unless asked otherwise
  std::int64_t port = 8000;            // [0, 65535]; 0: any free port (logged at start-up)
  std::string api_key;                 // empty: no bearer token required
  std::int64_t max_body_bytes = 1 << 20;   // [1 KiB, 1 GiB]
  double drain_timeout_s = 30.0;       // [0, 3600]
  bool log_prompts = false;            // access log never holds prompt text unless set
  std::int64_t io_threads = 2;         // [1, 64]: event-loop threads serving every connection
  std::int64_t max_connections = 10000;  // [1, 1000000]: open connections; more get a 503 and close
  double header_timeout_s = 10.0;      // (0, 3600]: a request's headers must arrive within this
  double body_timeout_s = 30.0;        // (0, 3600]: then its body within this
  double keep_alive_timeout_s = 5.0;   // (0, 3600]: an idle keep-alive connection is closed after this
  double write_timeout_s = 30.0;       // (0, 3600]: a client that reads nothing this long is dropped
  bool operator==(const ServerConfig&) const = default;
};

// [engine]: which backend runs the shards and how requests are batched.
struct EngineConfig {
  Backend backend = Backend::cpu;
  std::int64_t tensor_parallel_degree = 1;  // [1, 64]; must divide the model's heads and FFN width
  // [1, 64]: a layer split (HF Accelerate's device_map, "pipeline" stages run one at a time):
  // each stage holds a contiguous run of layers, the first ones one more when they do not divide
  // evenly, and hands its hidden states to the next; each stage is tensor_parallel_degree ranks
  // (cpu backend; the sim backend models the same: with tensor parallel 1 it is
  // sim.parallelism = "layers" over as many GPUs).
  std::int64_t pipeline_parallel_degree = 1;
  Batching batching = Batching::paged;
  std::int64_t seed = 0;                    // [0, 2^63)
  double step_timeout_s = 60.0;             // (0, 86400]: a step (or a reservation) unanswered
                                            // this long is failed; see scheduler_actor.hpp
  // cuda backend: the GPU of each rank this process hosts, in rank order (CUDA ordinals as
  // CUDA_VISIBLE_DEVICES leaves them, distinct, [0, 1023]); empty: 0, 1, 2, ...
  std::vector<std::int64_t> devices;
  // cuda backend: decode steps replayed as CUDA graphs (one per padded batch size, captured at
  // first use), so the host issues two calls a step instead of one per kernel. Off by default
  // until it has run on a GPU.
  bool cuda_graphs = false;
  bool operator==(const EngineConfig&) const = default;

  // The shard ranks the engine runs: stages in order, each its tensor-parallel ranks.
  std::int64_t world_size() const { return tensor_parallel_degree * pipeline_parallel_degree; }
  // Where world_size() comes from, for messages: "engine.tensor_parallel_degree",
  // "engine.pipeline_parallel_degree" or "engine.tensor_parallel_degree x pipeline_parallel_degree".
  std::string world_size_keys() const {
    if (pipeline_parallel_degree == 1) return "engine.tensor_parallel_degree";
    if (tensor_parallel_degree == 1) return "engine.pipeline_parallel_degree";
    return "engine.tensor_parallel_degree x pipeline_parallel_degree";
  }
};

// [cache]: the paged KV cache owned by the block-manager actor.
struct CacheConfig {
  std::int64_t block_size = 16;             // tokens per block; power of two in [1, 256]
  double gpu_memory_utilization = 0.9;      // (0, 1]: share of device memory the runtime may use
  double swap_space = 4.0;                  // GiB of host memory per GPU for swapped-out blocks
  double cpu_kv_space = 1.0;                // cpu backend: GiB of memory per rank for the KV cache
  bool prefix_caching = true;
  double watermark = 0.01;                  // [0, 0.5): share of device blocks kept free at admission
  std::int64_t num_gpu_blocks_override = 0; // 0: derive from the memory budget
  // cpu and cuda backends: the KV cache's element type; f16 holds twice the blocks in
  // cpu_kv_space (or the GPU's memory) and reads half the bytes per attended position (the sim
  // backend's GPUs always model 2 bytes).
  CacheDtype dtype = CacheDtype::f16;
  bool operator==(const CacheConfig&) const = default;
};

// [scheduler]: iteration-level batching policy.
struct SchedulerConfig {
  std::int64_t max_num_seqs = 256;            // [1, 65536] (DJL: max_rolling_batch_size)
  std::int64_t max_num_batched_tokens = 8192; // [1, 2^24]  (DJL: max_rolling_batch_prefill_tokens)
  double max_batch_delay_ms = 100.0;          // [0, 60000] (dynamic batching only)
  std::int64_t batch_size = 4;                // [1, 4096]  (dynamic batching only)
  bool chunked_prefill = false;
  Preemption preemption = Preemption::automatic;
  std::int64_t max_queue_len = 1024;          // [1, 2^24]: waiting requests before refusing
  double priority_aging_per_s = 1.0;          // [0, 1e6]: priority levels a waiting request
                                              // gains per second, so nothing starves
  bool operator==(const SchedulerConfig&) const = default;
};

// [model]: what the shards run.
struct ModelConfig {
  std::string name = "SmolLM2-135M-Instruct";  // served model name
  std::string path;                            // weights file or folder (GGUF, safetensors)
  std::string preset;                          // catalogue entry for the sim backend (e.g. "falcon-40b")
  std::int64_t max_model_len = 2048;           // [1, 2^20] tokens, prompt + output
  // cpu backend: matrices kept in the file's type ("stored": Q4_1 stays 4.5 bits a weight) or
  // dequantized to float at load ("f32", the earlier path, kept for comparison). cuda backend:
  // "stored" keeps them in bf16 on the GPU (dequantized at upload), "f32" in f32 (for checks).
  CpuWeights weights = CpuWeights::stored;
  bool operator==(const ModelConfig&) const = default;
};

// [sim]: the discrete-event simulator backend.
struct SimConfig {
  std::string hardware = "a10g";   // catalogue entry
  std::string instance;            // optional catalogue instance (e.g. "g5.12xlarge")
  SimClock clock = SimClock::virtual_time;
  std::int64_t seed = 0;           // [0, 2^63)
  // How engine.tensor_parallel_degree GPUs share the model: "tensor" (Megatron-style tensor
  // parallelism, all GPUs work on every layer) or "layers" (HF Accelerate's device_map: each
  // GPU holds a contiguous slice of layers and only one GPU works at a time). Not read when
  // engine.pipeline_parallel_degree is above 1: that key sets the split itself.
  SimParallelism parallelism = SimParallelism::tensor;
  // Instances (of sim.instance) the engine.world_size() GPUs are spread over, equally, in rank
  // order: above 1, tensor-parallel all-reduces and the layer split's activations that cross
  // between instances use their network (the catalogue's network_gbps and network_latency_us).
  std::int64_t nodes = 1;          // [1, 64]; divides engine.world_size()
  std::string hardware_catalogue;  // TOML file replacing the built-in hardware catalogue
  std::string model_catalogue;     // TOML file replacing the built-in model catalogue
  // A fault injected by the sim shard of rank fault_rank at the step whose id is fault_step, for
  // testing gateways and supervisors against a failing server: "error" (that step is answered
  // with an error), "hang" (that step is never answered; later ones are), "exit" (the shard
  // actor stops). "error" and "hang" need rank 0, the rank whose answer the scheduler awaits.
  SimFault fault = SimFault::none;
  std::int64_t fault_step = 1;     // [1, 2^63)
  std::int64_t fault_rank = 0;     // [0, 63], below engine.world_size()
  bool operator==(const SimConfig&) const = default;
};

// [cluster]: shard actors on other nodes (actorlm worker). With workers set, the head (serve,
// generate) hosts no rank itself: rank r runs on workers[placement[r]].
// The cluster.workers entry that stands for the head's own process: its ranks run there, in an
// in-process worker, beside the ranks on the other workers.
inline constexpr std::string_view head_worker = "head";

struct ClusterConfig {
  std::vector<std::string> workers;  // "host:port", port in [1, 65535], or head_worker (at most once)
  // [engine.world_size()]: each rank's index into workers; empty: contiguous and as even as
  // possible (worker i hosts ranks [i * ranks / n, (i + 1) * ranks / n), so a layer split's
  // stages go to the workers in order). Every worker hosts at least one rank.
  std::vector<std::int64_t> placement;
  // Mutual TLS between head and workers (PEM files): this node's certificate and key, and the
  // cluster's CA, which must have signed every peer's certificate. All three or none.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  // Plaintext with a non-loopback address (worker listen address, head's workers) is refused
  // unless this is true; then it is allowed with a warning at start.
  bool insecure = false;
  // With "head" in workers: the address the head's own ranks take data-plane connections on
  // (the others reach it there). Empty: 127.0.0.1, allowed only while every worker is on loopback.
  std::string head_data_address;
  // The head's limit for a worker to answer, load its ranks' weights and join the data plane.
  double connect_timeout_s = 120;
  // Heartbeats between head and workers (both ends must agree): a peer silent for 4 intervals
  // (a stopped process, a cut link) counts as lost.
  double heartbeat_interval_s = 0.5;
  bool tls() const { return !tls_cert.empty(); }
  bool operator==(const ClusterConfig&) const = default;
};

// The worker index of every rank (see ClusterConfig::placement); empty without workers.
// head_data_address, or 127.0.0.1 when it is empty.
std::string head_data_address(const ClusterConfig&);
std::vector<std::uint32_t> worker_of_rank(const ClusterConfig&, std::int64_t world_size);
// Whether a host name or address stays on this machine: localhost, 127.0.0.0/8, ::1.
bool is_loopback_host(std::string_view host);
// Whether an address names no single interface (empty, 0.0.0.0, ::): fine to listen on, not to
// be reached at.
bool is_unspecified_host(std::string_view host);
// "host:port" split at the last ':' (brackets of an IPv6 address removed), port in [0, 65535]
// (0: any free port, for a listen address); false when malformed.
bool split_host_port(std::string_view text, std::string& host, std::uint16_t& port);

struct Config {
  ServerConfig server;
  EngineConfig engine;
  CacheConfig cache;
  SchedulerConfig scheduler;
  ModelConfig model;
  SimConfig sim;
  ClusterConfig cluster;
  bool operator==(const Config&) const = default;  // field-wise; tests compare round trips
};

// One problem found in a config: where it is and what is wrong.
struct ConfigError {
  std::string file;
  std::uint32_t line = 0;    // 1-based; 0 when the problem has no position (e.g. missing file)
  std::uint32_t column = 0;  // 1-based
  std::string key;           // dotted path, e.g. "scheduler.max_num_seqs"; empty for syntax errors
  std::string message;       // "expected an integer in [1, 65536], found 0"

  // "FILE:LINE:COLUMN: KEY: MESSAGE", the form compilers use so editors can jump to it.
  std::string to_string() const;
};

// Either a valid Config or every error found (never both, never neither).
struct ParseResult {
  Config config;
  std::vector<ConfigError> errors;
  bool ok() const { return errors.empty(); }
};

// Parses TOML text; `file` names it in errors.
ParseResult parse_config(std::string_view toml_text, std::string_view file);
// Reads and parses a file; a missing or unreadable file is one error naming it.
ParseResult load_config(const std::string& path);
// The effective configuration as TOML, every key present, in schema order.
std::string to_toml(const Config&);

}  // namespace actorlm::config
