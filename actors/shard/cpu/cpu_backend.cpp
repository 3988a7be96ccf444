#include "actors/shard/cpu/cpu_backend.hpp"

#include "actors/serving/backend.hpp"
#include "actors/shard/checkpoint.hpp"
#include "actors/shard/cpu/cpu_shard.hpp"
#include "actors/shard/executor_actor.hpp"
#include "kernels/cpu/collective.hpp"
#include "kernels/cpu/model/kv_cache.hpp"
#include "model/arch/sharding.hpp"
#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"

#include <cblas.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace actorlm::shard {


namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

// The data-plane groups of one hosted rank (null where unused): `reduce` sums over the
// tensor-parallel ranks of its stage, `chain` hands hidden states between stages (rank r's
// neighbours are r - tp and r + tp). With one stage the reduce group is every rank; with tensor
// parallel 1 the chain is; with both, each stage has a reduce group of its own, meeting under a
// prefix of the one store.
struct RankGroups {
  std::shared_ptr<kernels::cpu::Collective> reduce, chain;
};

std::shared_ptr<kernels::cpu::CollectiveRendezvous> rendezvous(int size, const serving::RankHosting& hosting,
                                                               const std::string& prefix) {
  if (!hosting.store) return std::make_shared<kernels::cpu::CollectiveRendezvous>(size);
  std::shared_ptr<kernels::RendezvousStore> store = hosting.store;
  if (!prefix.empty()) store = std::make_shared<kernels::PrefixedStore>(store, prefix);
  return std::make_shared<kernels::cpu::CollectiveRendezvous>(size, std::move(store), hosting.data_address);
}

// How long a collective waits for its peers before it gives up (the join, and each all-reduce).
constexpr std::chrono::milliseconds reduce_timeout = std::chrono::seconds(60);

// The longest a rank blocks in a collective whose peer is gone: the registry's stop bound. A
// layer split's link to the next stage waits serving::step_wait_bound (a stage's receive waits
// for every stage before it to finish the step).
std::chrono::milliseconds cpu_stop_bound(const config::Config& cfg) {
  if (cfg.engine.world_size() == 1) return std::chrono::milliseconds(0);
  return cfg.engine.pipeline_parallel_degree > 1 ? std::max(reduce_timeout, serving::step_wait_bound(cfg))
                                                 : reduce_timeout;
}

// Every hosted rank joins its groups on a thread of its own, at once (each join waits for all
// the group's ranks, in this process and, with hosting.store, in the others). The reduce
// groups' ranks move together and wait reduce_timeout; a layer split's chain, `chain_timeout`.
std::vector<RankGroups> join_groups(int tp, int stages, const serving::RankHosting& hosting,
                                    std::chrono::milliseconds chain_timeout) {
  std::vector<RankGroups> out(hosting.ranks.size());
  const int world = tp * stages;
  if (world == 1) return out;
  const auto world_rv = rendezvous(world, hosting, "");
  std::vector<std::shared_ptr<kernels::cpu::CollectiveRendezvous>> stage_rv;
  if (tp > 1 && stages > 1)
    for (int s = 0; s < stages; ++s) stage_rv.push_back(rendezvous(tp, hosting, "stage" + std::to_string(s) + "/"));
  std::vector<std::thread> threads;
  std::mutex m;
  std::string error;
  constexpr std::chrono::milliseconds timeout = reduce_timeout;
  for (std::size_t i = 0; i < hosting.ranks.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        const int r = static_cast<int>(hosting.ranks[i]);
        std::shared_ptr<kernels::cpu::Collective> all =
            kernels::cpu::Collective::join(world_rv, r, stages == 1 ? timeout : std::max(timeout, chain_timeout));
        if (stages == 1) out[i].reduce = all;
        else out[i].chain = all;
        if (!stage_rv.empty()) out[i].reduce = kernels::cpu::Collective::join(stage_rv[std::size_t(r / tp)], r % tp, timeout);
      } catch (const std::exception& e) {
        std::lock_guard lock(m);
        error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  if (!error.empty()) throw std::runtime_error("cpu backend: data-plane group: " + error);
  return out;
}

}  // namespace

kernels::cpu::KvDtype kv_dtype(config::CacheDtype d) {
  switch (d) {
    case config::CacheDtype::f16: return kernels::cpu::KvDtype::f16;
    case config::CacheDtype::f32: return kernels::cpu::KvDtype::f32;
  }
  throw std::invalid_argument("cpu backend: unknown cache.dtype");
}

std::int32_t configure_cpu_threads(const config::Config& cfg) {
  // With stored weights each rank's pool splits the GEMMs by output rows and OpenBLAS (F32
  // matrices, attention) runs one thread inside each range, so the two never compete for cores;
  // with f32 weights (the earlier path) OpenBLAS threads each GEMM itself. A layer split's stages
  // run one at a time, so each takes all the cores a tensor rank would.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int per_rank = std::max(1, cores / static_cast<int>(cfg.engine.tensor_parallel_degree));
  const bool stored = cfg.model.weights == config::CpuWeights::stored;
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) openblas_set_num_threads(stored ? 1 : per_rank);
  return stored ? per_rank : 1;
}

CpuBackend load_cpu_shards(const config::Config& cfg, std::vector<std::unique_ptr<CpuShard>>& shards) {
  return load_cpu_shards(cfg, serving::RankHosting::all(cfg), shards);
}

CpuBackend load_cpu_shards(const config::Config& cfg, const serving::RankHosting& hosting,
                           std::vector<std::unique_ptr<CpuShard>>& shards) {
  CpuBackend b;
  b.model_path = resolve_model_path(cfg);
  const auto t0 = std::chrono::steady_clock::now();
  b.source = model::open_tensor_source(b.model_path);
  b.arch = model::read_architecture(*b.source);
  const auto world = static_cast<std::int32_t>(cfg.engine.world_size());
  const auto tp = static_cast<std::int32_t>(cfg.engine.tensor_parallel_degree);
  const auto stages = static_cast<std::uint32_t>(cfg.engine.pipeline_parallel_degree);
  const auto block_size = static_cast<std::uint32_t>(cfg.cache.block_size);
  // Throws, naming the degrees that would work, when the model does not split over `tp`.
  const auto heads = model::shard_for_rank(b.arch, 0, static_cast<std::uint32_t>(tp));
  if (stages > b.arch.layers)
    throw std::invalid_argument(fmt::format("engine.pipeline_parallel_degree = {}: the model has only {} layers to split",
                                            stages, b.arch.layers));
  // Every stage holds as many blocks; the first stages hold the most layers (one more when the
  // layers do not divide evenly), so they set the bytes of a block.
  b.kv_dtype = kv_dtype(cfg.cache.dtype);
  b.block_bytes = kernels::cpu::KvCache::bytes_per_block(b.arch, heads, block_size, b.kv_dtype,
                                                         model::layers_of_stage(b.arch, stages, 0));
  b.capacity.answering_rank = static_cast<std::uint32_t>(world - tp);  // tensor rank 0 of the last stage

  const auto blocks_in = [&](double gib_budget) {
    return static_cast<std::uint32_t>(std::min<double>(gib_budget * gib / double(b.block_bytes), 1u << 30));
  };
  b.capacity.device_blocks = cfg.cache.num_gpu_blocks_override > 0
                                 ? static_cast<std::uint32_t>(cfg.cache.num_gpu_blocks_override)
                                 : blocks_in(cfg.cache.cpu_kv_space);
  b.capacity.host_blocks = blocks_in(cfg.cache.swap_space);
  b.capacity.vocab_size = b.arch.vocab;
  const std::int64_t cache_tokens = std::int64_t(b.capacity.device_blocks) * block_size;
  if (cache_tokens < cfg.model.max_model_len) {
    const std::string budget =
        cfg.cache.num_gpu_blocks_override > 0
            ? fmt::format("cache.num_gpu_blocks_override = {}", cfg.cache.num_gpu_blocks_override)
            : fmt::format("cache.cpu_kv_space = {:g} GiB", cfg.cache.cpu_kv_space);
    throw std::invalid_argument(fmt::format(
        "{} holds {} tokens ({} bytes per block of {} tokens), fewer than model.max_model_len = {}; "
        "raise it or lower model.max_model_len",
        budget, cache_tokens, b.block_bytes, block_size, cfg.model.max_model_len));
  }
  if (cfg.model.max_model_len > std::int64_t{b.arch.max_context})
    spdlog::warn("model.max_model_len {} exceeds the model's trained context {}", cfg.model.max_model_len,
                 b.arch.max_context);

  const bool stored = cfg.model.weights == config::CpuWeights::stored;
  const auto storage = stored ? kernels::cpu::WeightStorage::stored : kernels::cpu::WeightStorage::f32;
  b.threads_per_rank = configure_cpu_threads(cfg);

  shards.clear();
  if (hosting.ranks.empty()) {  // a cluster's head: the weights are the workers'
    spdlog::info("cpu backend: {} ({}) opened for {} on the cluster's workers; KV cache ({}) {} blocks "
                 "of {} tokens per rank", b.model_path, b.arch.describe(), parallelism_text(cfg), kernels::cpu::to_string(b.kv_dtype),
                 b.capacity.device_blocks, block_size);
    return b;
  }
  const auto groups = join_groups(tp, static_cast<int>(stages), hosting, serving::step_wait_bound(cfg));
  for (std::size_t i = 0; i < hosting.ranks.size(); ++i) {
    const auto r = static_cast<std::int32_t>(hosting.ranks[i]);
    const auto stage = static_cast<std::uint32_t>(r / tp);
    auto w = std::make_shared<kernels::cpu::ModelWeights>(
        kernels::cpu::load_weights(*b.source, b.arch, r % tp, tp, storage, stage, stages));
    b.weight_bytes += w->bytes();
    kernels::cpu::AllReduce reduce;
    kernels::cpu::StageLink link;
    if (auto c = groups[i].reduce) reduce = [c](std::span<float> data) { c->all_reduce_sum(data); };
    if (auto c = groups[i].chain) {
      // Tensor rank k of a stage hands the stage's output (whole on every rank after the
      // all-reduce) to tensor rank k of the next.
      // The step's id, modulo 2^32, tags its hand-over: a stage that missed a step (it failed
      // on one rank only, or timed out) cannot take the next step's hidden states for it.
      if (!w->first_stage())
        link.receive = [c, from = r - tp](std::span<float> x, std::uint64_t step) {
          c->recv(x, from, static_cast<std::uint32_t>(step));
        };
      if (!w->last_stage())
        link.send = [c, to = r + tp](std::span<const float> x, std::uint64_t step) {
          c->send(x, to, static_cast<std::uint32_t>(step));
        };
    }
    shards.push_back(std::make_unique<CpuShard>(
        std::move(w), CpuShardOptions{block_size, b.capacity.device_blocks, b.capacity.host_blocks, b.threads_per_rank, b.kv_dtype},
        std::move(reduce), std::move(link)));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("cpu backend: {} ({}) loaded in {:.1f} s: {:.1f} MiB of weights ({}) over {} rank(s) ({}), "
               "{} thread(s) each; KV cache ({}) {} blocks of {} tokens ({:.1f} MiB per rank), {} host blocks for swap",
               b.model_path, b.arch.describe(), secs, double(b.weight_bytes) / (1 << 20),
               stored ? "as stored" : "dequantized to float", hosting.ranks.size() == std::size_t(world)
                   ? std::to_string(world) : fmt::format("{} of {}", hosting.ranks.size(), world),
               parallelism_text(cfg), b.threads_per_rank,
               kernels::cpu::to_string(b.kv_dtype), b.capacity.device_blocks, block_size,
               double(b.capacity.device_blocks) * double(b.block_bytes) / (1 << 20), b.capacity.host_blocks);
  return b;
}

CpuBackend load_cpu_backend(const config::Config& cfg) {
  return load_cpu_backend(cfg, serving::RankHosting::all(cfg));
}

CpuBackend load_cpu_backend(const config::Config& cfg, const serving::RankHosting& hosting) {
  auto shards = std::make_shared<std::vector<std::unique_ptr<CpuShard>>>();
  CpuBackend b = load_cpu_shards(cfg, hosting, *shards);
  if (hosting.ranks.empty()) return b;
  const auto world = static_cast<std::uint32_t>(cfg.engine.world_size());
  b.factory = executor_factory(shards, hosting.ranks, world, "cpu");

  return b;
}

namespace {

// The engine's view of the cpu backend: its shards, KV capacity, and the checkpoint's tokenizer
// with the chat format its template (or architecture) calls for.
serving::Backend serving_backend(const config::Config& cfg, const serving::RankHosting& hosting) {
  auto cpu = std::make_shared<CpuBackend>(load_cpu_backend(cfg, hosting));
  serving::Backend b;
  set_text_side(b, *cpu->source, cpu->model_path, cpu->arch);
  b.capacity = cpu->capacity;
  b.factory = cpu->factory;
  b.identity = model_identity(cpu->model_path);
  b.description = cpu->model_path + " on the cpu backend, " + parallelism_text(cfg) + ", KV cache " +
                  std::to_string(std::uint64_t(cpu->capacity.device_blocks) * cfg.cache.block_size) + " tokens";
  // One rank's weights as loaded here; a cluster's head loads none and does not guess (ranks
  // hold unequal shares: the embeddings are replicated).
  if (!hosting.ranks.empty())
    b.memory.push_back({cfg.model.weights == config::CpuWeights::stored ? "weights (as stored)" : "weights (float)",
                        double(cpu->weight_bytes) / double(hosting.ranks.size())});
  b.memory.push_back({fmt::format("KV cache ({})", kernels::cpu::to_string(cpu->kv_dtype)),
                      double(cpu->capacity.device_blocks) * double(cpu->block_bytes)});
  b.memory.push_back({"swap space (host)", double(cpu->capacity.host_blocks) * double(cpu->block_bytes)});
  return b;
}

[[maybe_unused]] const bool registered = serving::register_backend("cpu", serving_backend, cpu_stop_bound);

}  // namespace

}  // namespace actorlm::shard
