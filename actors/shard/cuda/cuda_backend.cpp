#include "actors/shard/cuda/cuda_backend.hpp"

#include "actors/shard/checkpoint.hpp"
#include "actors/shard/executor_actor.hpp"
#include "kernels/cpu/model/weights.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/nccl_group.hpp"
#include "model/arch/sharding.hpp"
#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace actorlm::shard {

namespace {

namespace cu = kernels::cuda;

constexpr double gb = 1e9;

CudaDevice device_info(int device) {
  cudaDeviceProp props{};
  ACTORLM_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  ACTORLM_CUDA_CHECK(cudaSetDevice(device));
  std::size_t free = 0, total = 0;
  ACTORLM_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return {props.name, double(total)};
}

int device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    throw std::runtime_error(std::string("cuda backend: no CUDA device (") +
                             (e != cudaSuccess ? cudaGetErrorString(e) : "the driver lists none") +
                             "); engine.backend = \"cpu\" runs the model here, \"sim\" simulates a GPU");
  return n;
}

}  // namespace

CudaShards load_cuda_shards(const config::Config& cfg, const serving::RankHosting& hosting) {
  CudaShards out;
  if (cfg.engine.pipeline_parallel_degree > 1)
    throw std::invalid_argument("engine.pipeline_parallel_degree = " + std::to_string(cfg.engine.pipeline_parallel_degree) +
                                ": the cuda backend does not run layer splits yet; use engine.tensor_parallel_degree");
  const auto t0 = std::chrono::steady_clock::now();
  out.model_path = resolve_model_path(cfg);
  out.source = model::open_tensor_source(out.model_path);
  const model::TensorSource& source = *out.source;
  out.arch = model::read_architecture(source);
  const auto world = static_cast<std::int32_t>(cfg.engine.world_size());
  model::shard_for_rank(out.arch, 0, static_cast<std::uint32_t>(world));  // throws naming the degrees that work
  const bool f32 = cfg.model.weights == config::CpuWeights::f32;
  const cu::ActDtype dtype = f32 ? cu::ActDtype::f32 : cu::ActDtype::bf16;
  const cu::ActDtype kv_dtype = cfg.cache.dtype == config::CacheDtype::f32 ? cu::ActDtype::f32 : cu::ActDtype::f16;

  // The plan: for the GPUs of this process, or (a cluster's head, which hosts none) for the
  // first GPU here when there is one; a head without GPUs trusts num_gpu_blocks_override.
  const int devices = hosting.ranks.empty() ? 0 : device_count();
  const std::vector<int> device_of = gpus_of_ranks(cfg.engine.devices, hosting.ranks.size(), devices);
  if (!hosting.ranks.empty()) {
    out.plan = plan_cuda_memory(out.arch, cfg.model.name, double(cu::act_bytes(dtype)), double(cu::act_bytes(kv_dtype)),
                                device_info(device_of[0]), cfg);
    out.capacity.device_blocks = out.plan.gpu.num_blocks;
    out.capacity.host_blocks = out.plan.host_blocks;
  } else {
    if (cfg.cache.num_gpu_blocks_override == 0)
      throw std::invalid_argument("cuda backend: a cluster's head plans no GPU memory of its own; set "
                                  "cache.num_gpu_blocks_override to the workers' block count");
    out.capacity.device_blocks = static_cast<std::uint32_t>(cfg.cache.num_gpu_blocks_override);
  }
  out.capacity.vocab_size = out.arch.vocab;
  if (hosting.ranks.empty()) return out;

  std::vector<std::shared_ptr<cu::NcclComm>> comms(hosting.ranks.size());
  if (world > 1) {
    auto joined = cu::join_nccl(world, hosting.ranks, device_of, hosting.store, std::chrono::seconds(60));
    for (std::size_t i = 0; i < joined.size(); ++i) comms[i] = std::move(joined[i]);
  }
  const auto block_size = static_cast<std::uint32_t>(cfg.cache.block_size);
  for (std::size_t i = 0; i < hosting.ranks.size(); ++i) {
    const auto r = static_cast<std::int32_t>(hosting.ranks[i]);
    // The matrices as stored on the host for the upload (dequantized one at a time), then freed.
    // Under tensor parallelism the embedding and the LM head are split by vocabulary rows, as
    // Megatron and vLLM split them and as the memory plan counts them.
    const kernels::cpu::ModelWeights host =
        kernels::cpu::load_weights(source, out.arch, r, world, kernels::cpu::WeightStorage::stored, 0, 1, world > 1);
    cu::DeviceAllReduce reduce;
    if (auto c = comms[i])
      reduce = [c](void* data, std::int64_t n, cu::ActDtype d, cudaStream_t s) { c->all_reduce_sum(data, n, d, s); };
    out.shards.push_back(std::make_unique<CudaShard>(
        host, dtype,
        CudaShardOptions{device_of[i], block_size, out.capacity.device_blocks, out.capacity.host_blocks, kv_dtype,
                         cfg.scheduler.max_num_batched_tokens, static_cast<std::int32_t>(cfg.scheduler.max_num_seqs),
                         static_cast<std::uint32_t>(cfg.model.max_model_len), cfg.engine.cuda_graphs},
        std::move(reduce)));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("cuda backend: {} ({}) loaded in {:.1f} s on {} GPU(s) ({}), weights in {}: {:.2f} GB per GPU "
               "(planned {:.2f} GB); KV cache ({}) {} blocks of {} tokens",
               out.model_path, out.arch.describe(), secs, hosting.ranks.size(), out.plan.hardware.name,
               f32 ? "f32" : "bf16", double(out.shards.front()->weight_bytes()) / gb, out.plan.gpu.weights_bytes / gb,
               kv_dtype == cu::ActDtype::f32 ? "f32" : "f16", out.capacity.device_blocks, block_size);
  if (!out.plan.catalogued)
    spdlog::warn("cuda backend: {} is not in the hardware catalogue; the plan assumes its largest CUDA context",
                 out.plan.hardware.name);
  return out;
}

namespace {

serving::Backend serving_backend(const config::Config& cfg, const serving::RankHosting& hosting) {
  auto loaded = std::make_shared<CudaShards>(load_cuda_shards(cfg, hosting));
  serving::Backend b;
  set_text_side(b, *loaded->source, loaded->model_path, loaded->arch);
  b.capacity = loaded->capacity;
  b.identity = model_identity(loaded->model_path);
  b.description = loaded->model_path + " on the cuda backend (" + loaded->plan.hardware.name + "), " +
                  parallelism_text(cfg) + ", KV cache " +
                  std::to_string(std::uint64_t(loaded->capacity.device_blocks) * cfg.cache.block_size) + " tokens";
  if (hosting.ranks.empty()) return b;  // a cluster's head: the workers hold the GPUs
  const sim::MemoryBreakdown& m = loaded->plan.gpu;
  b.memory = {{"weights (planned)", m.weights_bytes},
              {"activations (planned)", m.activation_bytes},
              {"CUDA context, framework, NCCL", m.overhead_bytes()},
              {"KV cache", m.kv_bytes},
              {"swap space (host)", double(loaded->capacity.host_blocks) * m.block_bytes}};
  // The shards live as long as the factory (an aliasing pointer into the loaded backend).
  b.factory = executor_factory(std::shared_ptr<std::vector<std::unique_ptr<CudaShard>>>(loaded, &loaded->shards),
                               hosting.ranks, static_cast<std::uint32_t>(cfg.engine.world_size()), "cuda");
  return b;
}

// NCCL's collectives have no timeout of their own: a rank blocked in one with a lost peer stops
// only with its process. The bound is the engine's step deadline and a margin
// (serving::step_wait_bound), at least 60 s.
std::chrono::milliseconds stop_bound(const config::Config& cfg) {
  if (cfg.engine.world_size() == 1) return std::chrono::milliseconds(0);
  return std::max<std::chrono::milliseconds>(std::chrono::seconds(60), serving::step_wait_bound(cfg));
}

[[maybe_unused]] const bool registered = serving::register_backend("cuda", serving_backend, stop_bound);

}  // namespace

}  // namespace actorlm::shard
