#pragma once
// The cuda backend's memory plan, as vLLM makes one and with the simulator's formulas
// (sim/model/memory_model.hpp, the same function `actorlm simulate --memory` calls): weights,
// the activation workspace for scheduler.max_num_batched_tokens, the CUDA context, the
// framework's and NCCL's buffers, then as many KV blocks as cache.gpu_memory_utilization leaves.
// The device is the one the driver reports (its name and total memory); the CUDA context's size
// comes from the catalogue entry of that GPU, when the catalogue has one. Under tensor
// parallelism the ranks split the embedding and the LM head by vocabulary rows, as the
// simulator plans them. Plain C++: no CUDA, so the CPU test suite checks that it agrees with the
// simulator's plan on one GPU and under tensor parallelism.

#include "actors/config/config.hpp"
#include "model/arch/architecture.hpp"
#include "sim/model/catalogue.hpp"
#include "sim/model/memory_model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorlm::shard {

struct CudaDevice {
  std::string name;          // as cudaGetDeviceProperties gives it, e.g. "NVIDIA H200"
  double memory_bytes = 0;   // total, as cudaMemGetInfo gives it
};

struct CudaMemoryPlan {
  sim::Hardware hardware;         // the catalogue's entry for the device (or a generic one) with its memory
  bool catalogued = false;        // whether the catalogue knew the device
  sim::MemoryBreakdown gpu;       // the binding GPU's breakdown: gpu.num_blocks KV blocks
  std::uint32_t host_blocks = 0;  // cache.swap_space in blocks
};

// The catalogue's entry for a device: the one whose model ("A10G", "H200": the word after the
// vendor in its name) is a word of the device's name (split at spaces and dashes), its memory
// replaced by the device's. Without
// one, a generic entry with the largest CUDA context of the catalogue (conservative).
sim::Hardware hardware_for(const CudaDevice& device, const sim::Catalogue& catalogue, bool* catalogued = nullptr);

// `weight_bytes` per weight as held on the device (2: bf16 / f16, 4: f32), `kv_element_bytes`
// per KV element (cache.dtype). Throws std::invalid_argument as the simulator does when the model
// does not fit (naming what is needed and what there is).
CudaMemoryPlan plan_cuda_memory(const model::Architecture& arch, const std::string& model_name, double weight_bytes,
                                double kv_element_bytes, const CudaDevice& device, const config::Config& cfg);

// The CUDA device of each of the `ranks` ranks this process hosts, with `visible` devices to
// choose from: engine.devices (`devices`) when given, else 0, 1, 2, ... Throws
// std::invalid_argument naming the key when the list does not hold one visible GPU per rank
// (none when the process hosts no rank: the list is then left for later).
std::vector<int> gpus_of_ranks(const std::vector<std::int64_t>& devices, std::size_t ranks, int visible);

}  // namespace actorlm::shard
