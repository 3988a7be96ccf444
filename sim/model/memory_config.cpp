#include "sim/model/memory_config.hpp"

#include <algorithm>
#include <cmath>

namespace actorlm::sim {

MemoryOptions memory_options(const config::Config& cfg) {
  MemoryOptions mo;
  mo.gpu_memory_utilization = cfg.cache.gpu_memory_utilization;
  mo.block_size = static_cast<std::uint32_t>(cfg.cache.block_size);
  mo.max_num_batched_tokens = static_cast<std::uint32_t>(cfg.scheduler.max_num_batched_tokens);
  mo.max_num_seqs = static_cast<std::uint32_t>(cfg.scheduler.max_num_seqs);
  mo.max_model_len = static_cast<std::uint32_t>(cfg.model.max_model_len);
  mo.num_gpu_blocks_override = static_cast<std::uint32_t>(
      std::min<std::int64_t>(cfg.cache.num_gpu_blocks_override, 0xffffffff));
  return mo;
}

Parallelism parallelism_of(const config::Config& cfg) {
  Parallelism p;
  p.kind = cfg.sim.parallelism == config::SimParallelism::layers || cfg.engine.pipeline_parallel_degree > 1
               ? ParallelKind::layers
               : ParallelKind::tensor;
  p.degree = static_cast<std::uint32_t>(cfg.engine.world_size());
  if (cfg.engine.pipeline_parallel_degree > 1) p.stage_tp = static_cast<std::uint32_t>(cfg.engine.tensor_parallel_degree);
  return p;
}

std::uint32_t swap_blocks(const config::Config& cfg, double block_bytes) {
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  return static_cast<std::uint32_t>(std::min(std::floor(cfg.cache.swap_space * gib / block_bytes), 4.0e9));
}

}  // namespace actorlm::sim
