// Paged decode attention's memory bandwidth on a GPU, against the device's own copy bandwidth
// (issue 13's figure: >= 80 % of it at batch 64, context 4k). One layer of a Llama-shaped model
// (32 query heads, 8 KV heads; head_dim 128 as Llama-3-8B, 64 as Llama-3.2-1B), bf16 cache and
// activations, block size 16, block tables a random permutation of the cache's blocks, batches
// 1 / 64 / 256 at contexts 512 / 4k / 32k. Small cases cycle over disjoint copies of their blocks
// (at least 256 MiB in all) so repetitions do not read a warm L2.
//
//   decode_attention_bench [--json FILE] [--reps N] [--only HEAD_DIM,BATCH,CONTEXT] [--chunk N]
//   (--only: that one case, e.g. to profile it with ncu; --chunk: this chunk_positions instead of
//   decode_attention_chunk's choice)
//
// Bytes counted: the K and V rows attended, the queries and the outputs (what the kernel cannot
// avoid); the split-K partials it writes and re-reads are not counted. Medians over --reps
// launches, each timed with CUDA events.
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/paged_attention.hpp"
#include "tools/gpu/bench_support.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace gpu = actorlm::kernels::cuda;
using actorlm::tools::gpu::fill_bf16;
using actorlm::tools::gpu::median_ms;

namespace {

constexpr std::uint32_t block_size = 16;
constexpr std::size_t anti_cache_bytes = 256ull << 20;

// Device-to-device copy of 2 GiB: bytes read plus bytes written over the time.
double copy_gbps(int reps) {
  const std::size_t n = 2ull << 30;
  void *src = nullptr, *dst = nullptr;
  ACTORLM_CUDA_CHECK(cudaMalloc(&src, n));
  ACTORLM_CUDA_CHECK(cudaMalloc(&dst, n));
  fill_bf16(src, n / 2, 1);
  const float ms = median_ms(reps, [&](int) { ACTORLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice)); });
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * double(n) / (ms * 1e-3) / 1e9;
}

struct Shape {
  std::int32_t q_heads, kv_heads, head_dim;
};

struct Result {
  Shape shape;
  std::int32_t batch;
  std::uint32_t context, chunk;
  float ms;
  double gbps;
};

// All cases of one head shape over one pair of planes sized for the largest.
void run_shape(const Shape& sh, const std::vector<std::int32_t>& batches, const std::vector<std::uint32_t>& contexts,
               int reps, std::uint32_t fixed_chunk, std::vector<Result>& out) {
  const std::uint32_t max_blocks =
      std::uint32_t(*std::max_element(batches.begin(), batches.end())) *
      ((*std::max_element(contexts.begin(), contexts.end()) + block_size - 1) / block_size);
  const std::size_t row_elems = std::size_t(sh.kv_heads) * block_size * sh.head_dim;  // per block
  const std::size_t plane_elems = std::size_t(max_blocks) * row_elems;
  void *k = nullptr, *v = nullptr;
  ACTORLM_CUDA_CHECK(cudaMalloc(&k, plane_elems * 2));
  ACTORLM_CUDA_CHECK(cudaMalloc(&v, plane_elems * 2));
  fill_bf16(k, plane_elems, 2);
  fill_bf16(v, plane_elems, 3);
  std::vector<std::uint32_t> perm(max_blocks);
  std::iota(perm.begin(), perm.end(), 0u);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(11));

  for (const std::int32_t batch : batches)
    for (const std::uint32_t ctx : contexts) {
      const std::uint32_t per_seq = (ctx + block_size - 1) / block_size, blocks = per_seq * batch;
      const double kv_bytes = 2.0 * batch * double(ctx) * sh.kv_heads * sh.head_dim * 2;
      const std::uint32_t sets = std::max<std::uint32_t>(
          1, std::min<std::uint32_t>(max_blocks / blocks, std::uint32_t(std::ceil(anti_cache_bytes / kv_bytes))));
      std::vector<std::uint32_t> tables(perm.begin(), perm.begin() + std::size_t(sets) * blocks);
      std::vector<std::uint32_t> lens(batch, ctx);
      const std::size_t qn = std::size_t(batch) * sh.q_heads * sh.head_dim;
      gpu::DecodeAttentionParams p;
      p.seqs = batch;
      p.q_heads = sh.q_heads;
      p.kv_heads = sh.kv_heads;
      p.head_dim = sh.head_dim;
      p.block_size = block_size;
      p.max_blocks_per_seq = per_seq;
      p.max_context = ctx;
      p.scale = 1.0f / std::sqrt(float(sh.head_dim));
      p.act_dtype = gpu::ActDtype::bf16;
      p.cache_dtype = gpu::ActDtype::bf16;
      const std::uint32_t chunk = fixed_chunk ? fixed_chunk : gpu::decode_attention_chunk(p);
      p.chunk_positions = chunk;
      const std::size_t ws = gpu::decode_attention_workspace_floats(batch, sh.q_heads, sh.head_dim, ctx, chunk);
      std::uint32_t *dt = nullptr, *dl = nullptr;
      void *dq = nullptr, *dout = nullptr;
      float* dws = nullptr;
      ACTORLM_CUDA_CHECK(cudaMalloc(&dt, tables.size() * 4));
      ACTORLM_CUDA_CHECK(cudaMalloc(&dl, lens.size() * 4));
      ACTORLM_CUDA_CHECK(cudaMalloc(&dq, qn * 2));
      ACTORLM_CUDA_CHECK(cudaMalloc(&dout, qn * 2));
      ACTORLM_CUDA_CHECK(cudaMalloc(&dws, ws * 4));
      ACTORLM_CUDA_CHECK(cudaMemcpy(dt, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice));
      ACTORLM_CUDA_CHECK(cudaMemcpy(dl, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
      fill_bf16(dq, qn, 4);
      p.q = dq;
      p.k_plane = k;
      p.v_plane = v;
      p.context_lens = dl;
      p.out = dout;
      p.workspace = dws;
      const float ms = median_ms(reps, [&](int i) {
        p.block_tables = dt + std::size_t(i % sets) * blocks;
        gpu::decode_attention(p, nullptr);
      });
      const double bytes = kv_bytes + 2.0 * qn * 2;
      out.push_back({sh, batch, ctx, chunk, ms, bytes / (ms * 1e-3) / 1e9});
      cudaFree(dt), cudaFree(dl), cudaFree(dq), cudaFree(dout), cudaFree(dws);
    }
  cudaFree(k);
  cudaFree(v);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string json;
  int reps = 20;
  int only_hd = 0, only_batch = 0;
  unsigned only_ctx = 0, chunk = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--chunk" && i + 1 < argc) chunk = unsigned(std::atoi(argv[++i]));
    else if (a == "--only" && i + 1 < argc && std::sscanf(argv[++i], "%d,%d,%u", &only_hd, &only_batch, &only_ctx) == 3) {}
    else {
      std::fprintf(stderr, "usage: decode_attention_bench [--json FILE] [--reps N] [--only HEAD_DIM,BATCH,CONTEXT] [--chunk N]\n");
      return 2;
    }
  }
  if (!actorlm::tools::gpu::device_present()) return 77;
  cudaDeviceProp prop{};
  ACTORLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double copy = only_hd ? 0.0 : copy_gbps(reps);
  std::printf("device: %s; copy bandwidth %.0f GB/s (read + write, 2 GiB device to device)\n", prop.name, copy);
  std::vector<Result> results;
  for (const Shape& sh : {Shape{32, 8, 128}, Shape{32, 8, 64}}) {
    if (only_hd && sh.head_dim != only_hd) continue;
    const std::vector<std::int32_t> batches = only_hd ? std::vector<std::int32_t>{only_batch} : std::vector<std::int32_t>{1, 64, 256};
    const std::vector<std::uint32_t> contexts = only_hd ? std::vector<std::uint32_t>{only_ctx} : std::vector<std::uint32_t>{512, 4096, 32768};
    run_shape(sh, batches, contexts, reps, chunk, results);
  }
  std::printf("%-12s %6s %8s %6s %10s %9s %8s\n", "heads", "batch", "context", "chunk", "ms", "GB/s", "of copy");
  for (const Result& r : results)
    std::printf("%2d/%d hd%-4d %6d %8u %6u %10.4f %9.0f %7.1f%%\n", r.shape.q_heads, r.shape.kv_heads,
                r.shape.head_dim, r.batch, r.context, r.chunk, r.ms, r.gbps, 100.0 * r.gbps / copy);
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + json);
    std::fprintf(f, "{\"device\": \"%s\", \"copy_gbps\": %.1f, \"cases\": [", prop.name, copy);
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(f, "%s\n  {\"q_heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"batch\": %d, \"context\": %u, "
                      "\"chunk\": %u, \"ms\": %.5f, \"gbps\": %.1f, \"fraction_of_copy\": %.4f}",
                   i ? "," : "", r.shape.q_heads, r.shape.kv_heads, r.shape.head_dim, r.batch, r.context, r.chunk, r.ms, r.gbps,
                   r.gbps / copy);
    }
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "decode_attention_bench: %s\n", e.what());
  return 1;
}
