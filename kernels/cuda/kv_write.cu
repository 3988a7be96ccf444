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

}  // namespace

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
