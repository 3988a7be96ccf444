#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/decode_chunk_rule.hpp"
#include "kernels/cuda/elementwise_math.hpp"
#include "kernels/cuda/paged_attention.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace actorlm::kernels::cuda {

namespace {

namespace m = cuda_math;

constexpr int attention_threads = 128;  // 4 warps
constexpr std::uint32_t max_chunk_positions = 2048;
constexpr std::size_t score_bytes = 32 * 1024;     // [heads of the block, chunk] scores in shared memory
constexpr int unroll = 4;                          // 16-byte loads in flight per thread

__host__ __device__ inline std::uint32_t chunks_of(std::uint32_t positions, std::uint32_t chunk) { return (positions + chunk - 1) / chunk; }

// 16 bytes of a K or V row (4 f32 or 8 f16/bf16 elements) widened to floats.
template <class C>
constexpr int vec_elems = 16 / sizeof(C);
template <class C>
__device__ inline void widen(const uint4& x, float (&out)[vec_elems<C>]) {
  if constexpr (std::is_same_v<C, float>) {
    out[0] = __uint_as_float(x.x), out[1] = __uint_as_float(x.y), out[2] = __uint_as_float(x.z), out[3] = __uint_as_float(x.w);
  } else {
    const std::uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 f;
      if constexpr (std::is_same_v<C, __half>) f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      else f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
      out[2 * i] = f.x, out[2 * i + 1] = f.y;
    }
  }
}

// Sums M values per thread over the R threads of a row (aligned groups of R lanes, R and M
// powers of two) in M - 1 + log2(R / M) shuffles instead of M log2(R): each stage sends half of
// the values still held and keeps the other half (a butterfly that transposes as it sums).
// After it, the thread at row lane l holds in x[0 .. max(1, M / R)) the sums of the values
// reduced_index<M, R>(l) + i.
template <int M, int R, int O = R / 2, int COUNT = M>
__device__ inline void transpose_reduce(float (&x)[M], int l) {
  if constexpr (O > 0) {
    if constexpr (COUNT > 1) {
      constexpr int half = COUNT / 2;
      const bool upper = (l & O) != 0;
#pragma unroll
      for (int i = 0; i < half; ++i) {
        const float send = upper ? x[i] : x[i + half];
        const float keep = upper ? x[i + half] : x[i];
        x[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
      }
      transpose_reduce<M, R, O / 2, half>(x, l);
    } else {
      x[0] += __shfl_xor_sync(0xffffffffu, x[0], O);
      transpose_reduce<M, R, O / 2, 1>(x, l);
    }
  }
}
template <int M, int R>
__device__ inline int reduced_index(int l) {
  return M <= R ? l / (R / M) : l * (M / R);
}

// Pass 1. grid: (chunks of max_context, q_heads / H, seqs); a thread block per (chunk, H query
// heads of one KV group, sequence), so a chunk's K and V cross the memory bus once per H heads.
// A row (position) of K or V is read by `row_threads` threads, 16 bytes each, as streaming loads
// (read once: evict first); the block covers `rows` positions at a time and loads the next
// `unroll` of them while it computes on the current ones. The chunk's block ids are read into
// shared memory first, so a row's address costs no dependent global load. Scores: [H, chunk] in
// shared memory; the values' weighted sums are added over the rows into shared [H, head_dim].
template <class A, class C, int H, int HD>
__global__ void __launch_bounds__(attention_threads) decode_chunks_kernel(DecodeAttentionParams p, std::uint32_t chunks) {
  extern __shared__ float smem[];
  constexpr int V = vec_elems<C>, hd = HD;
  constexpr int row_threads = HD / V, rows = attention_threads / row_threads;
  const std::uint32_t bs = p.block_size, bs_shift = __ffs(bs) - 1;  // a power of two (checked)
  float* scores = smem;                                  // [H, chunk_positions]
  float* acc_sum = scores + H * p.chunk_positions;       // [H, head_dim]
  float* stats = acc_sum + H * hd;                       // [H, 2]: max, sum of exponentials
  auto* blocks = reinterpret_cast<std::uint32_t*>(stats + 2 * H);  // [chunk_positions / block_size]
  const std::uint32_t c = blockIdx.x;
  const std::int32_t h0 = blockIdx.y * H, s = blockIdx.z;
  const std::uint32_t ctx = p.context_lens[s], p0 = c * p.chunk_positions;
  if (p0 >= ctx) return;  // past this sequence's context: pass 2 reads only its used chunks
  const std::uint32_t n = min(ctx, p0 + p.chunk_positions) - p0;
  const std::int32_t g = static_cast<std::int32_t>(std::int64_t(h0) * p.kv_heads / p.q_heads);
  const std::uint32_t* table = p.block_tables + std::size_t(s) * p.max_blocks_per_seq + (p0 >> bs_shift);
  for (std::uint32_t i = threadIdx.x; i < ((n + bs - 1) >> bs_shift); i += attention_threads) blocks[i] = table[i];
  for (int i = threadIdx.x; i < H * hd; i += attention_threads) acc_sum[i] = 0;
  const int row = threadIdx.x / row_threads, d0 = (threadIdx.x % row_threads) * V;

  // This thread's slice of the H query rows.
  float q[H][V];
  const A* qs = static_cast<const A*>(p.q) + (std::int64_t(s) * p.q_heads + h0) * hd;
#pragma unroll
  for (int j = 0; j < H; ++j)
#pragma unroll
    for (int e = 0; e < V; ++e) q[j][e] = load(qs, std::int64_t(j) * hd + d0 + e);
  __syncthreads();

  const std::uint64_t block_stride = std::uint64_t(p.kv_heads) * bs * hd;
  const std::uint64_t head_offset = std::uint64_t(g) * bs * hd + d0;
  const std::uint32_t step = rows * unroll;
  // Rows first + row + u * rows (u < unroll) of a plane; zeros past n.
  auto load_rows = [&](const C* plane, std::uint32_t first, uint4 (&r)[unroll]) {
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const std::uint32_t pos = first + row + u * rows;
      r[u] = pos < n ? __ldcs(reinterpret_cast<const uint4*>(plane + blocks[pos >> bs_shift] * block_stride +
                                                               head_offset + std::uint64_t(pos & (bs - 1)) * hd))
                     : make_uint4(0, 0, 0, 0);
    }
  };

  // 1. Scores, reduced over a row's threads by shuffles: every thread runs the same iterations.
  const C* kp = static_cast<const C*>(p.k_plane);
  uint4 cur[unroll], next[unroll] = {};
  load_rows(kp, 0, cur);
  for (std::uint32_t first = 0; first < n; first += step) {
    if (first + step < n) load_rows(kp, first + step, next);
    float dot[unroll * H];  // [row u, head j]
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      float k[V];
      widen<C>(cur[u], k);
#pragma unroll
      for (int j = 0; j < H; ++j) {
        float d = 0;
#pragma unroll
        for (int e = 0; e < V; ++e) d += q[j][e] * k[e];
        dot[u * H + j] = d;
      }
    }
    constexpr int M = unroll * H;
    const int l = threadIdx.x % row_threads;
    transpose_reduce<M, row_threads>(dot, l);
    constexpr int spread = M < row_threads ? row_threads / M : 1;  // lanes holding the same sum
    if (l % spread == 0) {
#pragma unroll
      for (int i = 0; i < (M > row_threads ? M / row_threads : 1); ++i) {
        const int idx = reduced_index<M, row_threads>(l) + i, u = idx / H, j = idx % H;
        const std::uint32_t pos = first + row + u * rows;
        if (pos < n) scores[j * p.chunk_positions + pos] = dot[i] * p.scale;
      }
    }
#pragma unroll
    for (int u = 0; u < unroll; ++u) cur[u] = next[u];
  }
  // The values' first rows are on their way while the softmax runs.
  const C* vp = static_cast<const C*>(p.v_plane);
  load_rows(vp, 0, cur);
  __syncthreads();

  // 2. Softmax numerators: a warp per head.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int j = warp; j < H; j += attention_threads / 32) {
    float* sj = scores + j * p.chunk_positions;
    float mx = -INFINITY;
    for (std::uint32_t i = lane; i < n; i += 32) mx = fmaxf(mx, sj[i]);
    mx = warp_max(mx);
    float sum = 0;
    for (std::uint32_t i = lane; i < n; i += 32) {
      const float e = expf(sj[i] - mx);
      sj[i] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    if (lane == 0) stats[2 * j] = mx, stats[2 * j + 1] = sum;
  }
  __syncthreads();

  // 3. Weighted values: each thread sums its rows' 16-byte slices, then adds them into acc_sum.
  float acc[H][V] = {};
  for (std::uint32_t first = 0; first < n; first += step) {
    if (first + step < n) load_rows(vp, first + step, next);
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const std::uint32_t pos = first + row + u * rows;
      if (pos >= n) break;
      float v[V];
      widen<C>(cur[u], v);
#pragma unroll
      for (int j = 0; j < H; ++j) {
        const float w = scores[j * p.chunk_positions + pos];
#pragma unroll
        for (int e = 0; e < V; ++e) acc[j][e] += w * v[e];
      }
    }
#pragma unroll
    for (int u = 0; u < unroll; ++u) cur[u] = next[u];
  }
#pragma unroll
  for (int j = 0; j < H; ++j)
#pragma unroll
    for (int e = 0; e < V; ++e) atomicAdd(&acc_sum[j * hd + d0 + e], acc[j][e]);
  __syncthreads();

  for (int j = 0; j < H; ++j) {
    float* part = p.workspace + ((std::size_t(s) * p.q_heads + h0 + j) * chunks + c) * (hd + 2);
    if (threadIdx.x == 0) part[0] = stats[2 * j], part[1] = stats[2 * j + 1];
    for (std::int32_t d = threadIdx.x; d < hd; d += attention_threads) part[2 + d] = acc_sum[j * hd + d];
  }
}

// Query heads per pass-1 block: the largest divisor of the KV group (q_heads / kv_heads) that
// keeps the accumulators in registers and the block's scores in `score_bytes`.
int heads_per_block(const DecodeAttentionParams& p) {
  const int group = p.q_heads / p.kv_heads;
  for (int h : {8, 4, 2})
    if (group % h == 0 && std::size_t(h) * p.chunk_positions * sizeof(float) <= score_bytes) return h;
  return 1;
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

// What both decode_attention and decode_attention_chunk need of the shape.
void check_heads_and_blocks(const DecodeAttentionParams& p) {
  check(p.q_heads > 0 && p.kv_heads > 0 && p.q_heads % p.kv_heads == 0, "query heads must be a multiple of KV heads");
  check(p.block_size > 0 && (p.block_size & (p.block_size - 1)) == 0, "block_size must be a power of two");
}

using Pass1Kernel = void (*)(DecodeAttentionParams, std::uint32_t);

// The one place the dtypes, the block's head count and the head size become template arguments.
Pass1Kernel pass1_kernel(const DecodeAttentionParams& p, int heads) {
  Pass1Kernel k = nullptr;
  with_types(p.act_dtype, p.cache_dtype, [&](auto* a, auto* c) {
    using A = ElementOf<decltype(a)>;
    using C = ElementOf<decltype(c)>;
    auto pick = [&](auto hd) {
      constexpr int HD = decltype(hd)::value;
      switch (heads) {
        case 8: k = decode_chunks_kernel<A, C, 8, HD>; break;
        case 4: k = decode_chunks_kernel<A, C, 4, HD>; break;
        case 2: k = decode_chunks_kernel<A, C, 2, HD>; break;
        default: k = decode_chunks_kernel<A, C, 1, HD>; break;
      }
    };
    if (p.head_dim == 64) pick(std::integral_constant<int, 64>{});
    else pick(std::integral_constant<int, 128>{});
  });
  return k;
}

// Pass 1's dynamic shared memory: scores, value sums, the softmax statistics, the block ids.
std::size_t pass1_smem(const DecodeAttentionParams& p, int heads) {
  return (std::size_t(heads) * (p.chunk_positions + p.head_dim) + 2 * heads) * sizeof(float) +
         p.chunk_positions / p.block_size * sizeof(std::uint32_t);
}

}  // namespace

std::size_t decode_attention_workspace_floats(std::int32_t seqs, std::int32_t q_heads, std::int32_t head_dim,
                                              std::uint32_t max_context, std::uint32_t chunk_positions) {
  return std::size_t(seqs) * q_heads * chunks_of(max_context, chunk_positions) * (head_dim + 2);
}

namespace {

// What decode_attention_chunk asks the runtime, remembered: it runs once per forward step, and
// the answers depend only on the device and the kernel's variant and shared memory. Shards on
// several threads share it.
class OccupancyMemo {
 public:
  int sms(int device) {
    std::lock_guard lock(mutex_);
    if (auto it = sms_.find(device); it != sms_.end()) return it->second;
    int n = 0;  // remembered only once the runtime has answered
    ACTORLM_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return sms_[device] = n;
  }
  int blocks_per_sm(int device, Pass1Kernel kernel, std::size_t smem) {
    std::lock_guard lock(mutex_);
    const auto key = std::make_tuple(device, reinterpret_cast<std::uintptr_t>(kernel), smem);
    if (auto it = per_sm_.find(key); it != per_sm_.end()) return it->second;
    int n = 0;
    ACTORLM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, attention_threads, smem));
    return per_sm_[key] = n;
  }

 private:
  std::mutex mutex_;
  std::map<int, int> sms_;
  std::map<std::tuple<int, std::uintptr_t, std::size_t>, int> per_sm_;
};

OccupancyMemo& occupancy() {
  static OccupancyMemo memo;
  return memo;
}

}  // namespace

std::uint32_t decode_attention_chunk(const DecodeAttentionParams& shape) {
  check_heads_and_blocks(shape);
  int device = 0;
  ACTORLM_CUDA_CHECK(cudaGetDevice(&device));
  const int sms = occupancy().sms(device);
  std::vector<ChunkFit> fits;
  for (const std::uint32_t c : decode_chunk_candidates(shape.max_context, shape.block_size, max_chunk_positions)) {
    DecodeAttentionParams p = shape;
    p.chunk_positions = c;
    const int heads = heads_per_block(p);
    const int per_sm = occupancy().blocks_per_sm(device, pass1_kernel(p, heads), pass1_smem(p, heads));
    fits.push_back({c, std::uint64_t(std::max(shape.seqs, 1)) * (shape.q_heads / heads) * chunks_of(shape.max_context, c),
                    std::uint64_t(std::max(per_sm, 1)) * sms});
  }
  return choose_decode_chunk(fits, sms);
}

void decode_attention(const DecodeAttentionParams& p, cudaStream_t stream) {
  if (p.seqs == 0) return;
  check(p.q && p.k_plane && p.v_plane && p.block_tables && p.context_lens && p.out && p.workspace, "null pointer");
  check(p.head_dim == 64 || p.head_dim == 128, "head_dim " + std::to_string(p.head_dim) + " (64 or 128)");
  check_heads_and_blocks(p);
  check(p.chunk_positions > 0 && p.chunk_positions % p.block_size == 0 && p.chunk_positions <= max_chunk_positions,
          "chunk_positions must be a multiple of the block size, at most " + std::to_string(max_chunk_positions));
  check(p.max_context > 0 && p.max_context <= std::uint64_t(p.max_blocks_per_seq) * p.block_size,
          "max_context past the block tables");
  const std::uint32_t chunks = chunks_of(p.max_context, p.chunk_positions);
  const int heads = heads_per_block(p);
  const dim3 grid(chunks, p.q_heads / heads, p.seqs);
  pass1_kernel(p, heads)<<<grid, attention_threads, pass1_smem(p, heads), stream>>>(p, chunks);
  with_type(p.act_dtype, [&](auto* a) {
    decode_merge_kernel<ElementOf<decltype(a)>><<<dim3(p.q_heads, p.seqs), p.head_dim, 0, stream>>>(p, chunks);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace actorlm::kernels::cuda
