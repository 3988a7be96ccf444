#include "actors/shard/cuda/cuda_memory_plan.hpp"

#include "sim/model/memory_config.hpp"

#include <algorithm>
#include <stdexcept>

namespace actorlm::shard {

namespace {

// "NVIDIA H200 141GB SXM" -> "H200".
std::string model_word(const std::string& name) {
  const auto space = name.find(' ');
  if (space == std::string::npos) return name;
  const auto end = name.find(' ', space + 1);
  return name.substr(space + 1, end == std::string::npos ? std::string::npos : end - space - 1);
}

// Whether `word` is one of the name's words, split at spaces and dashes ("NVIDIA A100-SXM4-80GB"
// has A100; "NVIDIA L40S" has no L4).
bool has_word(const std::string& name, const std::string& word) {
  std::size_t begin = 0;
  while (begin <= name.size()) {
    const std::size_t end = std::min(name.find_first_of(" -", begin), name.size());
    if (name.compare(begin, end - begin, word) == 0 && end - begin == word.size()) return true;
    begin = end + 1;
  }
  return false;
}

}  // namespace

sim::Hardware hardware_for(const CudaDevice& device, const sim::Catalogue& catalogue, bool* catalogued) {
  for (const sim::Hardware& h : catalogue.all_hardware()) {
    const std::string word = model_word(h.name);
    if (!word.empty() && has_word(device.name, word)) {
      sim::Hardware out = h;
      out.memory_bytes = device.memory_bytes;
      if (catalogued) *catalogued = true;
      return out;
    }
  }
  sim::Hardware out;
  out.key = "device";
  out.name = device.name;
  out.memory_bytes = device.memory_bytes;
  for (const sim::Hardware& h : catalogue.all_hardware())
    out.cuda_context_bytes = std::max(out.cuda_context_bytes, h.cuda_context_bytes);
  if (catalogued) *catalogued = false;
  return out;
}

CudaMemoryPlan plan_cuda_memory(const model::Architecture& arch, const std::string& model_name, double weight_bytes,
                                double kv_element_bytes, const CudaDevice& device, const config::Config& cfg) {
  const sim::Catalogue& catalogue = sim::Catalogue::builtin();
  CudaMemoryPlan plan;
  plan.hardware = hardware_for(device, catalogue, &plan.catalogued);
  sim::ModelPreset preset;
  static_cast<model::Architecture&>(preset) = arch;
  preset.key = model_name;
  preset.name = model_name;
  preset.weight_bytes = weight_bytes;
  sim::MemoryOptions mo = sim::memory_options(cfg);
  mo.kv_element_bytes = kv_element_bytes;
  // Under tensor parallelism the ranks split the embedding and the LM head by vocabulary rows
  // (kernels/cpu/model/weights.hpp's vocab_parallel), ceil(vocab / tp) each, as the simulator's
  // plan counts them (MemoryOptions::vocab_parallel, its default).
  plan.gpu = sim::plan_memory(preset, plan.hardware, catalogue.runtime(), sim::parallelism_of(cfg), mo);
  plan.host_blocks = sim::swap_blocks(cfg, plan.gpu.block_bytes);
  return plan;
}

std::vector<int> gpus_of_ranks(const std::vector<std::int64_t>& devices, std::size_t ranks, int visible) {
  const std::string seen = std::to_string(visible) + " GPU(s) visible (CUDA_VISIBLE_DEVICES chooses which)";
  std::vector<int> out(ranks);
  if (ranks == 0) return out;  // a cluster's head, or a worker's offer before it is given ranks
  if (devices.empty()) {
    if (std::size_t(visible) < ranks)
      throw std::invalid_argument("cuda backend: " + std::to_string(ranks) + " rank(s) to host here but " + seen);
    for (std::size_t i = 0; i < ranks; ++i) out[i] = static_cast<int>(i);
    return out;
  }
  if (devices.size() != ranks)
    throw std::invalid_argument("engine.devices lists " + std::to_string(devices.size()) + " GPU(s), but this process hosts " +
                                std::to_string(ranks) + " rank(s): one GPU per rank");
  for (std::size_t i = 0; i < ranks; ++i) {
    if (devices[i] < 0 || devices[i] >= visible)
      throw std::invalid_argument("engine.devices[" + std::to_string(i) + "] = " + std::to_string(devices[i]) +
                                  ", but there are " + seen);
    out[i] = static_cast<int>(devices[i]);
  }
  return out;
}

}  // namespace actorlm::shard
