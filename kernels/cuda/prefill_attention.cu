#include "kernels/cuda/prefill_attention.hpp"

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise_math.hpp"

#include <string>
#include <type_traits>

namespace actorlm::kernels::cuda {

namespace {

namespace m = cuda_math;

constexpr int tile_rows = 16;      // query rows of a thread block
constexpr int tile_positions = 32; // positions per K/V tile: one per lane when scoring
constexpr int threads = 128;       // 4 warps, 4 query rows each
constexpr int rows_per_warp = tile_rows / (threads / 32);

// grid: (tiles of max_query_len, q_heads, seqs). Shared memory: the tile's queries (scaled), one
// K tile (rows padded by one float: lane j reads row j, so the 32 lanes hit 32 banks), one V
// tile, in f32, and each row's exponentiated scores of the tile (lane j's at es[..][j]), which
// every lane of the warp then reads in turn (a broadcast, as 32 shuffles would be, but one
// __syncwarp instead of 32 warp collectives: the cuda_emu emulation pays per collective).
template <class A, class C, int HD>
__global__ void __launch_bounds__(threads) prefill_kernel(PrefillAttentionParams p) {
  __shared__ float qs[tile_rows][HD];
  __shared__ float ks[tile_positions][HD + 1];
  __shared__ float vs[tile_positions][HD];
  __shared__ float es[tile_rows][tile_positions];
  constexpr int per_lane = HD / 32;  // output elements a lane accumulates per row
  const std::int32_t h = blockIdx.y, s = blockIdx.z;
  const std::uint32_t q0 = p.query_starts[s], nq = p.query_starts[s + 1] - q0, r0 = blockIdx.x * tile_rows;
  if (r0 >= nq) return;  // the whole block: no barrier is skipped by part of it
  const std::uint32_t rows = min(std::uint32_t(tile_rows), nq - r0);
  const std::uint32_t first = p.context_lens[s] - nq;  // position of the sequence's first new row
  const std::uint32_t last_pos = first + r0 + rows - 1;
  const std::int32_t g = static_cast<std::int32_t>(std::int64_t(h) * p.kv_heads / p.q_heads);
  const std::uint32_t* table = p.block_tables + std::size_t(s) * p.max_blocks_per_seq;
  const std::int64_t q_stride = std::int64_t(p.q_heads) * HD;
  const A* q = static_cast<const A*>(p.q);
  const C* kp = static_cast<const C*>(p.k_plane);
  const C* vp = static_cast<const C*>(p.v_plane);

  for (int i = threadIdx.x; i < tile_rows * HD; i += threads) {
    const int r = i / HD, d = i % HD;
    qs[r][d] = r < int(rows) ? load(q, (q0 + r0 + r) * q_stride + std::int64_t(h) * HD + d) * p.scale : 0.0f;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float row_max[rows_per_warp], row_sum[rows_per_warp], acc[rows_per_warp][per_lane];
#pragma unroll
  for (int i = 0; i < rows_per_warp; ++i) {
    row_max[i] = -INFINITY, row_sum[i] = 0;
#pragma unroll
    for (int k = 0; k < per_lane; ++k) acc[i][k] = 0;
  }

  const std::uint32_t tiles = last_pos / tile_positions + 1;
  for (std::uint32_t t = 0; t < tiles; ++t) {
    const std::uint32_t p0 = t * tile_positions;
    __syncthreads();  // the queries are in; the last tile's readers are done
    for (int i = threadIdx.x; i < tile_positions * HD; i += threads) {
      const int j = i / HD, d = i % HD;
      const std::uint32_t pos = p0 + j;
      float kx = 0, vx = 0;
      if (pos <= last_pos) {
        const std::uint64_t at = m::kv_plane_index(m::paged_slot(table, p.block_size, pos), p.block_size, p.kv_heads, HD, g, d);
        kx = load(kp, std::int64_t(at));
        vx = load(vp, std::int64_t(at));
      }
      ks[j][d] = kx;
      vs[j][d] = vx;
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < rows_per_warp; ++i) {
      const int r = warp * rows_per_warp + i;
      const std::uint32_t qpos = first + r0 + r;
      if (r >= int(rows) || p0 > qpos) continue;  // the same for the whole warp
      const std::uint32_t pos = p0 + lane;
      float score = -INFINITY;
      if (pos <= qpos) {
        float dot = 0;
#pragma unroll 8
        for (int d = 0; d < HD; ++d) dot += qs[r][d] * ks[lane][d];
        score = dot;
      }
      const float new_max = fmaxf(row_max[i], warp_max(score));  // finite: position p0 <= qpos scored
      const float e = pos <= qpos ? expf(score - new_max) : 0.0f;
      const float w = m::merge_weight(row_max[i], new_max);  // 0 on the first tile (max -inf)
      row_sum[i] = row_sum[i] * w + warp_sum(e);
#pragma unroll
      for (int k = 0; k < per_lane; ++k) acc[i][k] *= w;
      const int visible = int(min(std::uint32_t(tile_positions), qpos - p0 + 1));
      // Row r's slot is rewritten only in the next tile, after its __syncthreads.
      es[r][lane] = e;
      __syncwarp();
      for (int j = 0; j < visible; ++j) {
        const float ej = es[r][j];
#pragma unroll
        for (int k = 0; k < per_lane; ++k) acc[i][k] += ej * vs[j][lane + 32 * k];
      }
      row_max[i] = new_max;
    }
  }

  A* out = static_cast<A*>(p.out);
#pragma unroll
  for (int i = 0; i < rows_per_warp; ++i) {
    const int r = warp * rows_per_warp + i;
    if (r >= int(rows)) continue;
#pragma unroll
    for (int k = 0; k < per_lane; ++k)
      store(out, (q0 + r0 + r) * q_stride + std::int64_t(h) * HD + lane + 32 * k, acc[i][k] / row_sum[i]);
  }
}

void check(bool ok, const std::string& what) { require(ok, "prefill_attention: " + what); }

}  // namespace

void prefill_attention(const PrefillAttentionParams& p, cudaStream_t stream) {
  if (p.seqs == 0 || p.max_query_len == 0) return;
  check(p.q && p.k_plane && p.v_plane && p.block_tables && p.query_starts && p.context_lens && p.out, "null pointer");
  check(p.head_dim == 64 || p.head_dim == 128, "head_dim " + std::to_string(p.head_dim) + " (64 or 128)");
  check(p.q_heads > 0 && p.kv_heads > 0 && p.q_heads % p.kv_heads == 0, "query heads must be a multiple of KV heads");
  check(p.block_size > 0 && p.max_blocks_per_seq > 0, "block size and table width must be positive");
  const dim3 grid((p.max_query_len + tile_rows - 1) / tile_rows, p.q_heads, p.seqs);
  with_types(p.act_dtype, p.cache_dtype, [&](auto* a, auto* c) {
    using A = ElementOf<decltype(a)>;
    using C = ElementOf<decltype(c)>;
    if (p.head_dim == 64) prefill_kernel<A, C, 64><<<grid, threads, 0, stream>>>(p);
    else prefill_kernel<A, C, 128><<<grid, threads, 0, stream>>>(p);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace actorlm::kernels::cuda
