#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise_math.hpp"
#include "kernels/cuda/kv_write.hpp"

#include <stdexcept>

namespace actorlm::kernels::cuda {

namespace {

// grid: tokens; one thread block per token row, its threads over the kv_heads * head_dim values.
template <class A, class C>
__global__ void reshape_and_cache_kernel(KvWriteParams p) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t slot = p.slots[t];
  if (slot < 0) return;  // padding
  if (slot >= std::int64_t(p.num_blocks) * p.block_size) {
    if (threadIdx.x == 0 && p.rejected != nullptr) atomicAdd(p.rejected, 1u);
    return;
  }
  const A* k = static_cast<const A*>(p.k) + t * p.row_stride;
  const A* v = static_cast<const A*>(p.v) + t * p.row_stride;
  C* kc = static_cast<C*>(p.k_plane);
  C* vc = static_cast<C*>(p.v_plane);
  const std::int32_t width = p.kv_heads * p.head_dim;
  for (std::int32_t e = threadIdx.x; e < width; e += blockDim.x) {
    const std::uint64_t at = cuda_math::kv_plane_index(std::uint64_t(slot), p.block_size, p.kv_heads, p.head_dim,
                                                       e / p.head_dim, e % p.head_dim);
    store(kc, std::int64_t(at), load(k, e));
    store(vc, std::int64_t(at), load(v, e));
  }
}

// A float rounded to A and widened again: what a value stored in A memory reads back as.
template <class A>
__device__ float rounded(float v) {
  A a[1];
  store(a, 0, v);
  return load(a, 0);
}

// grid: tokens; one thread block per token row, its threads over the row's query pairs, K pairs
// and V values.
template <class A, class C>
__global__ void rope_and_cache_kernel(RopeCacheParams p) {
  const KvWriteParams& kv = p.kv;
  const std::int64_t t = blockIdx.x;
  const std::int64_t slot = kv.slots[t];
  const bool past = slot >= std::int64_t(kv.num_blocks) * kv.block_size;
  if (past && threadIdx.x == 0 && kv.rejected != nullptr) atomicAdd(kv.rejected, 1u);
  const bool cached = slot >= 0 && !past;
  const std::int32_t hd = kv.head_dim, half = hd / 2;
  const A* qi = static_cast<const A*>(p.q_in) + t * kv.row_stride;
  A* qo = static_cast<A*>(p.q_out) + t * std::int64_t(p.q_heads) * hd;
  const A* k = static_cast<const A*>(kv.k) + t * kv.row_stride;
  const A* v = static_cast<const A*>(kv.v) + t * kv.row_stride;
  C* kc = static_cast<C*>(kv.k_plane);
  C* vc = static_cast<C*>(kv.v_plane);
  const std::int32_t q_pairs = p.q_heads * half, pairs = q_pairs + kv.kv_heads * half;
  const std::int32_t items = pairs + (cached ? kv.kv_heads * hd : 0);
  for (std::int32_t e = threadIdx.x; e < items; e += blockDim.x) {
    if (e < pairs) {
      const bool query = e < q_pairs;
      const std::int32_t pe = query ? e : e - q_pairs, h = pe / half, i = pe % half;
      const cuda_math::RopePair pair = cuda_math::rope_pair(p.halves, half, i);
      const float angle = cuda_math::rope_angle(p.positions[t], p.linear_factor, p.inv_freq[i]);
      const A* src = (query ? qi : k) + std::int64_t(h) * hd;
      float x0 = load(src, pair.a), x1 = load(src, pair.b);
      cuda_math::rope_rotate(x0, x1, cosf(angle), sinf(angle));
      if (query) {
        store(qo + std::int64_t(h) * hd, pair.a, x0);
        store(qo + std::int64_t(h) * hd, pair.b, x1);
      } else if (cached) {
        const auto at = [&](std::int32_t d) {
          return std::int64_t(cuda_math::kv_plane_index(std::uint64_t(slot), kv.block_size, kv.kv_heads, hd, h, d));
        };
        store(kc, at(pair.a), rounded<A>(x0));
        store(kc, at(pair.b), rounded<A>(x1));
      }
    } else {
      const std::int32_t ve = e - pairs;
      store(vc,
            std::int64_t(cuda_math::kv_plane_index(std::uint64_t(slot), kv.block_size, kv.kv_heads, hd, ve / hd, ve % hd)),
            load(v, ve));
    }
  }
}

}  // namespace

void rope_and_cache(const RopeCacheParams& p, cudaStream_t stream) {
  const KvWriteParams& kv = p.kv;
  if (kv.tokens == 0) return;
  require(kv.k && kv.v && kv.slots && kv.k_plane && kv.v_plane && p.q_in && p.q_out && p.positions && p.inv_freq,
          "rope_and_cache: null pointer");
  require(p.q_heads > 0 && kv.kv_heads > 0 && kv.head_dim > 0 && kv.head_dim % 2 == 0 && kv.block_size > 0 &&
              kv.row_stride >= std::int64_t(p.q_heads) * kv.head_dim &&
              kv.row_stride >= std::int64_t(kv.kv_heads) * kv.head_dim,
          "rope_and_cache: bad shape");
  require(p.q_out != p.q_in && p.q_out != kv.k && p.q_out != kv.v, "rope_and_cache: q_out aliases an input");
  with_types(kv.act_dtype, kv.cache_dtype, [&](auto* a, auto* c) {
    rope_and_cache_kernel<ElementOf<decltype(a)>, ElementOf<decltype(c)>>
        <<<static_cast<unsigned>(kv.tokens), 128, 0, stream>>>(p);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void reshape_and_cache(const KvWriteParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  require(p.k && p.v && p.slots && p.k_plane && p.v_plane, "reshape_and_cache: null pointer");
  require(p.kv_heads > 0 && p.head_dim > 0 && p.block_size > 0 && p.row_stride >= std::int64_t(p.kv_heads) * p.head_dim,
          "reshape_and_cache: bad shape");
  with_types(p.act_dtype, p.cache_dtype, [&](auto* a, auto* c) {
    reshape_and_cache_kernel<ElementOf<decltype(a)>, ElementOf<decltype(c)>>
        <<<static_cast<unsigned>(p.tokens), 128, 0, stream>>>(p);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace actorlm::kernels::cuda
