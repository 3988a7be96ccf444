#pragma once
// Sets up the cpu backend for an engine: finds and loads the model checkpoint, splits its
// weights over the tensor-parallel ranks, sizes the KV cache from the memory budget
// (cache.cpu_kv_space per rank for the cache, cache.swap_space for swapped-out blocks, both at
// cache.dtype's bytes per element: f16 holds twice the blocks of f32), joins
// the ranks' all-reduce group (process memory in one process, Gloo across processes) and hands
// the engine a factory for the shard actors.

#include "actors/config/config.hpp"
#include "actors/engine/engine.hpp"
#include "actors/serving/backend.hpp"
#include "actors/shard/checkpoint.hpp"
#include "kernels/cpu/model/paged_attention.hpp"
#include "model/arch/architecture.hpp"

#include <memory>
#include <string>
#include <vector>

namespace actorlm::model { class TensorSource; }

namespace actorlm::shard {

class CpuShard;

struct CpuBackend {
  std::string model_path;
  std::shared_ptr<const model::TensorSource> source;  // the opened checkpoint (for the tokenizer)
  model::Architecture arch;
  engine::KvCapacity capacity;
  kernels::cpu::KvDtype kv_dtype = kernels::cpu::KvDtype::f16;  // cache.dtype
  std::size_t block_bytes = 0;         // one KV block on one rank, in kv_dtype
  std::size_t weight_bytes = 0;        // all ranks together, as held (stored type or float)
  std::int32_t threads_per_rank = 1;   // each rank's thread pool (1 with model.weights = "f32":
                                       // OpenBLAS threads the GEMMs then, as before)
  engine::ShardFactory factory;        // each rank's actor, once
};

// cache.dtype as the cpu kernels' element type.
kernels::cpu::KvDtype kv_dtype(config::CacheDtype);

// The threads of each rank's pool for cfg (the cores shared among the ranks with stored weights;
// 1 with model.weights = "f32", where OpenBLAS threads the GEMMs as before), and OpenBLAS's own
// thread count set to match unless OPENBLAS_NUM_THREADS is set.
std::int32_t configure_cpu_threads(const config::Config& cfg);

// Throws model::ModelFileError for a bad checkpoint and std::invalid_argument for a
// configuration the model cannot be served with (tensor parallel degree, cache too small).
// Loads the weights of the ranks `hosting` names, joins their all-reduce group (with the ranks
// elsewhere when hosting.store is set) and makes a factory for exactly those ranks.
CpuBackend load_cpu_backend(const config::Config& cfg, const serving::RankHosting& hosting);
CpuBackend load_cpu_backend(const config::Config& cfg);  // every rank in this process
// The same without actors: the ranks' shards go to `shards` (shards[i] is rank hosting.ranks[i],
// their all-reduce group joined) and the factory is left empty. `actorlm calibrate` runs them
// directly, every rank in this process.
CpuBackend load_cpu_shards(const config::Config& cfg, const serving::RankHosting& hosting,
                           std::vector<std::unique_ptr<CpuShard>>& shards);
CpuBackend load_cpu_shards(const config::Config& cfg, std::vector<std::unique_ptr<CpuShard>>& shards);

}  // namespace actorlm::shard
