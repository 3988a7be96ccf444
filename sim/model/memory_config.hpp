#pragma once
// The memory model's inputs as a configuration gives them: the one translation that both the
// sim backend (`actorlm simulate --memory`) and the cuda backend (`actorlm serve` on a GPU) use,
// so that both plan the same KV blocks for the same model, device and keys.

#include "actors/config/config.hpp"
#include "sim/model/memory_model.hpp"

namespace actorlm::sim {

// gpu_memory_utilization, block size, batched tokens, sequences, model length and the block
// override from [cache], [scheduler] and [model].
MemoryOptions memory_options(const config::Config& cfg);

// engine.world_size() GPUs on one node: tensor parallel, or a layer split (sim.parallelism =
// "layers", or engine.pipeline_parallel_degree above 1 with its tensor-parallel stages).
Parallelism parallelism_of(const config::Config& cfg);

// cache.swap_space (GiB of host memory per GPU) in blocks of `block_bytes`.
std::uint32_t swap_blocks(const config::Config& cfg, double block_bytes);

}  // namespace actorlm::sim
