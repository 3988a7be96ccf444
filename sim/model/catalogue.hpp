#pragma once
// The simulator's catalogue: GPUs, cloud instances and model presets, read from
// configs/catalogue/{hardware,models}.toml (embedded in the library; a user file may replace
// either). Plain C++: no CAF. Units are SI in memory (bytes, bytes/s, FLOP/s, s) whatever the
// TOML spelling (MiB, GB/s, TFLOPS, us).

#include "model/arch/architecture.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::sim {

using model::FfnKind;
using model::NormKind;

struct Hardware {
  std::string key;                  // catalogue name, e.g. "a10g"
  std::string name;                 // "NVIDIA A10G"
  double memory_bytes = 0;          // bytes: the whole device, as the driver reports it
  double bandwidth = 0;             // bytes/s: peak DRAM bandwidth
  double flops = 0;                 // FLOP/s: dense fp16/bf16 tensor peak
  std::string link;                 // "PCIe Gen4 x16, no NVLink"
  double link_bandwidth = 0;        // bytes/s per direction between two GPUs
  double link_latency = 0;          // s per ring hop
  double host_bandwidth = 0;        // bytes/s host <-> device (KV swaps)
  double compute_efficiency = 1;    // (0, 1]: achievable share of `flops`
  double memory_efficiency = 1;     // (0, 1]: of `bandwidth`
  double link_efficiency = 1;       // (0, 1]: of `link_bandwidth`
  double kernel_launch = 0;         // s per kernel
  double cuda_context_bytes = 0;    // bytes taken by the CUDA context on each GPU
  // Optional terms for kernels that the roofline alone does not describe, such as the cpu
  // backend's (kernels/cpu/model/matmul.hpp), which `actorlm calibrate` fits. Absent (0), each
  // term vanishes and the roofline above is the whole model.
  std::uint32_t small_gemm_rows = 0; // GEMMs of fewer rows run on few-row kernels at
  double small_gemm_flops = 0;       //   this FLOP/s (roofline with the weights' bytes)
  double gemm_weight_rate = 0;       // weights/s: GEMMs of small_gemm_rows rows or more first pass
                                     //   over their weights at this rate (dequantization)
  std::uint32_t large_batch_rows = 0; // GEMMs of at least this many rows (a step of many prompts)
  double large_batch_flops = 0;       //   run at this FLOP/s instead of flops: on the cpu backend
                                      //   their activations outgrow the caches
  double attention_flops = 0;        // FLOP/s of decode attention (0: flops x compute_efficiency)
  double prefill_attention_flops = 0; // FLOP/s of prefill attention (0: as decode attention)
  double step_overhead = 0;          // s per step on the host, besides the kernels
  // How much of a kernel's memory traffic and arithmetic overlap: a kernel takes the longer of
  // the two plus (1 - memory_overlap) x the shorter. 1 (GPUs): the roofline, the longer alone;
  // 0: their sum, as calibrate writes it for the cpu backend; between, a partial overlap (the cpu
  // backend's threads compute on one weight panel while the hardware prefetcher streams the
  // next: calibrate --fit-overlap fits it).
  double memory_overlap = 1;
};

// Memory the serving runtime takes on every GPU besides the CUDA context.
struct RuntimeOverheads {
  double framework_bytes = 0;    // bytes: allocator fragmentation, library workspaces
  double comm_buffer_bytes = 0;  // bytes: collective buffers, only with more than one GPU
};

struct Instance {
  std::string key;              // "g5.12xlarge"
  std::string gpu;              // a Hardware key
  std::uint32_t gpus = 0;
  double price_per_hour = 0;    // USD, on-demand
  std::string price_note;       // where the price comes from (or that it is an assumption)
  // Between two instances of this type (sim.nodes > 1). Absent: it cannot span nodes.
  double network_bandwidth = 0;   // bytes/s per direction, as the instance's NIC is listed
  double network_latency = 0;     // s one way for a small message (NCCL over the network)
  double network_efficiency = 1;  // (0, 1]: the share of network_bandwidth a collective reaches
  std::string network_note;       // where the figures come from
  bool has_network() const { return network_bandwidth > 0; }
};

// "g5.12xlarge" for one node, "2 x g5.12xlarge" for two.
inline std::string instances_label(std::string_view key, std::uint32_t nodes) {
  return (nodes > 1 ? std::to_string(nodes) + " x " : std::string()) + std::string(key);
}

// A named catalogue entry: the shared architecture description (model/arch) under the key that
// `model.preset` selects. The memory and cost models take it as the Architecture it is.
struct ModelPreset : model::Architecture {
  std::string key;   // "falcon-40b"
  std::string name;  // "Falcon-40B"
  double weight_bytes = 2;  // bytes per weight as deployed (2: fp16/bf16; a quantized file less)
};

// A catalogue file that cannot be read or is wrong; what() lists every problem, one per line,
// as "FILE:LINE:COLUMN: KEY: MESSAGE".
struct CatalogueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

class Catalogue {
 public:
  // The catalogue built from the embedded configs/catalogue/*.toml (parsed once).
  static const Catalogue& builtin();
  // Parses TOML text; `*_file` names the text in errors. Throws CatalogueError.
  static Catalogue parse(std::string_view hardware_toml, std::string_view hardware_file,
                         std::string_view models_toml, std::string_view models_file);
  // Reads the files; an empty path stands for the embedded file. Throws CatalogueError.
  static Catalogue load(const std::string& hardware_path, const std::string& models_path);

  // Throw std::invalid_argument naming the known entries when `key` is not one of them.
  const Hardware& hardware(std::string_view key) const;
  const Instance& instance(std::string_view key) const;
  const ModelPreset& model(std::string_view key) const;

  const std::vector<Hardware>& all_hardware() const { return hardware_; }
  // A copy in which `h` replaces the entry of its key (or is added).
  Catalogue with(const Hardware& h) const;
  const std::vector<Instance>& all_instances() const { return instances_; }
  const std::vector<ModelPreset>& all_models() const { return models_; }
  const RuntimeOverheads& runtime() const { return runtime_; }

 private:
  std::vector<Hardware> hardware_;    // sorted by key (toml++ tables are)
  std::vector<Instance> instances_;
  std::vector<ModelPreset> models_;
  RuntimeOverheads runtime_;
};

// The embedded catalogue files' text (generated by cmake/EmbedText.cmake).
extern const std::string_view embedded_hardware_catalogue;
extern const std::string_view embedded_model_catalogue;

}  // namespace actorlm::sim
