#pragma once
// Sets up the cuda backend for an engine (engine.backend = "cuda"): one shard per GPU. Loads
// this process's ranks' share of the checkpoint with the cpu loader (the same sharding and
// checks), uploads it to each rank's GPU (engine.devices[i] for rank i of this process, by default
// device i; CUDA_VISIBLE_DEVICES picks which are visible), plans memory with the simulator's formulas (cuda_memory_plan.hpp), allocates the
// KV cache, joins the NCCL group (its unique id through the rendezvous store when ranks live in
// other processes) and hands the engine a factory for the shard actors.
//
// Keys: model.weights = "stored" keeps the matrices in bf16 on the GPU (any checkpoint type is
// dequantized on the host first), "f32" keeps them in f32 (for checks against the cpu backend);
// cache.dtype f16 or f32 for the KV cache; cache.gpu_memory_utilization, swap_space,
// num_gpu_blocks_override as for the simulator. Layer splits do not run on the GPU yet.

#include "actors/config/config.hpp"
#include "actors/serving/backend.hpp"
#include "actors/shard/cuda/cuda_memory_plan.hpp"
#include "actors/shard/cuda/cuda_shard.hpp"

#include <memory>
#include <string>
#include <vector>

namespace actorlm::model { class TensorSource; }

namespace actorlm::shard {

// What the backend set up. `shards[i]` is rank hosting.ranks[i].
struct CudaShards {
  std::string model_path;
  std::shared_ptr<const model::TensorSource> source;  // the opened checkpoint (also for the tokenizer)
  model::Architecture arch;
  CudaMemoryPlan plan;
  engine::KvCapacity capacity;
  std::vector<std::unique_ptr<CudaShard>> shards;  // each holds its NCCL communicator
};

// Throws std::runtime_error when there is no CUDA device (saying so and naming the other
// backends), std::invalid_argument when too few are visible for the ranks or engine.devices does
// not give each rank one, model::ModelFileError for a bad checkpoint, and
// std::invalid_argument for a configuration the GPUs cannot serve (the memory plan's message).
CudaShards load_cuda_shards(const config::Config& cfg, const serving::RankHosting& hosting);

}  // namespace actorlm::shard
