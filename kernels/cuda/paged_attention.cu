#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise_math.hpp"
#include "kernels/cuda/paged_attention.hpp"

#include <stdexcept>
#include <string>

namespace actorlm::kernels::cuda {

namespace {

namespace m = cuda_math;

constexpr int attention_threads = 128;  // 4 warps
constexpr std::uint32_t max_chunk_positions = 2048;  // the scores of a chunk stay in shared memory
constexpr std::int32_t max_head_dim = 128;

__host__ __device__ inline std::uint32_t chunks_of(std::uint32_t positions, std::uint32_t chunk) { return (positions + chunk - 1) / chunk; }

// Pass 1. grid: (chunks of max_context, q_heads, seqs); one thread block per (chunk, head, sequence).
template <class A, class C>
__global__ void decode_chunks_kernel(DecodeAttentionParams p, std::uint32_t chunks) {
  __shared__ float q[max_head_dim];
  __shared__ float scores[max_chunk_positions];
  __shared__ float red[32];
  const std::uint32_t c = blockIdx.x;
  const std::int32_t h = blockIdx.y, s = blockIdx.z;
  const std::uint32_t ctx = p.context_lens[s], p0 = c * p.chunk_positions;
  if (p0 >= ctx) return;  // past this sequence's context: pass 2 reads only its used chunks
  const std::uint32_t p1 = min(ctx, p0 + p.chunk_positions);
  const std::int32_t g = static_cast<std::int32_t>(std::int64_t(h) * p.kv_heads / p.q_heads);
  const std::int32_t hd = p.head_dim;
  const std::uint32_t* table = p.block_tables + std::size_t(s) * p.max_blocks_per_seq;
  const A* qs = static_cast<const A*>(p.q) + (std::int64_t(s) * p.q_heads + h) * hd;
  const C* kp = static_cast<const C*>(p.k_plane);
  const C* vp = static_cast<const C*>(p.v_plane);
  for (std::int32_t d = threadIdx.x; d < hd; d += blockDim.x) q[d] = load(qs, d);
  __syncthreads();

  // Scores: a warp per position, its lanes over head_dim.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (std::uint32_t pos = p0 + warp; pos < p1; pos += warps) {
    const std::uint64_t slot = m::paged_slot(table, p.block_size, pos);
    float dot = 0;
    for (std::int32_t d = lane; d < hd; d += 32)
      dot += q[d] * load(kp, std::int64_t(m::kv_plane_index(slot, p.block_size, p.kv_heads, hd, g, d)));
    dot = warp_sum(dot);
    if (lane == 0) scores[pos - p0] = dot * p.scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (std::uint32_t i = threadIdx.x; i < p1 - p0; i += blockDim.x) mx = fmaxf(mx, scores[i]);
  mx = block_max(mx, red);
  float sum = 0;
  for (std::uint32_t i = threadIdx.x; i < p1 - p0; i += blockDim.x) {
    const float e = expf(scores[i] - mx);
    scores[i] = e;
    sum += e;
  }
  sum = block_sum(sum, red);  // its barriers also publish the exps

  float* part = p.workspace + ((std::size_t(s) * p.q_heads + h) * chunks + c) * (hd + 2);
  if (threadIdx.x == 0) {
    part[0] = mx;
    part[1] = sum;
  }
  for (std::int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0;
    for (std::uint32_t pos = p0; pos < p1; ++pos) {
      const std::uint64_t slot = m::paged_slot(table, p.block_size, pos);
      acc += scores[pos - p0] * load(vp, std::int64_t(m::kv_plane_index(slot, p.block_size, p.kv_heads, hd, g, d)));
    }
    part[2 + d] = acc;
  }
}

// Pass 2. grid: (q_heads, seqs); a thread per output element of the head.
template <class A>
__global__ void decode_merge_kernel(DecodeAttentionParams p, std::uint32_t chunks) {
  const std::int32_t h = blockIdx.x, s = blockIdx.y, hd = p.head_dim;
  // Contexts longer than max_context are outside the contract; they read no unwritten partial.
  const std::uint32_t used = min(chunks, chunks_of(p.context_lens[s], p.chunk_positions));
  const float* parts = p.workspace + (std::size_t(s) * p.q_heads + h) * chunks * (hd + 2);
  float row_max = -INFINITY;
  for (std::uint32_t c = 0; c < used; ++c) row_max = fmaxf(row_max, parts[c * (hd + 2)]);
  A* o = static_cast<A*>(p.out) + (std::int64_t(s) * p.q_heads + h) * hd;
  for (std::int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float total = 0, acc = 0;
    for (std::uint32_t c = 0; c < used; ++c) {
      const float* pc = parts + c * (hd + 2);
      const float w = m::merge_weight(pc[0], row_max);
      total += w * pc[1];
      acc += w * pc[2 + d];
    }
    store(o, d, used == 0 ? 0.0f : acc / total);
  }
}

void check(bool ok, const std::string& what) { require(ok, "decode_attention: " + what); }

}  // namespace

std::size_t decode_attention_workspace_floats(std::int32_t seqs, std::int32_t q_heads, std::int32_t head_dim,
                                              std::uint32_t max_context, std::uint32_t chunk_positions) {
  return std::size_t(seqs) * q_heads * chunks_of(max_context, chunk_positions) * (head_dim + 2);
}

void decode_attention(const DecodeAttentionParams& p, cudaStream_t stream) {
  if (p.seqs == 0) return;
  check(p.q && p.k_plane && p.v_plane && p.block_tables && p.context_lens && p.out && p.workspace, "null pointer");
  check(p.head_dim == 64 || p.head_dim == 128, "head_dim " + std::to_string(p.head_dim) + " (64 or 128)");
  check(p.q_heads > 0 && p.kv_heads > 0 && p.q_heads % p.kv_heads == 0, "query heads must be a multiple of KV heads");
  check(p.block_size > 0 && p.chunk_positions % p.block_size == 0 && p.chunk_positions <= max_chunk_positions,
          "chunk_positions must be a multiple of the block size, at most " + std::to_string(max_chunk_positions));
  check(p.max_context > 0 && p.max_context <= std::uint64_t(p.max_blocks_per_seq) * p.block_size,
          "max_context past the block tables");
  const std::uint32_t chunks = chunks_of(p.max_context, p.chunk_positions);
  with_types(p.act_dtype, p.cache_dtype, [&](auto* a, auto* c) {
    using A = ElementOf<decltype(a)>;
    decode_chunks_kernel<A, ElementOf<decltype(c)>>
        <<<dim3(chunks, p.q_heads, p.seqs), attention_threads, 0, stream>>>(p, chunks);
    decode_merge_kernel<A><<<dim3(p.q_heads, p.seqs), p.head_dim, 0, stream>>>(p, chunks);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace actorlm::kernels::cuda
