#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/embedding.hpp"

#include <stdexcept>

namespace actorlm::kernels::cuda {

namespace {

// grid: tokens; one thread block per output row.
template <class W, class A>
__global__ void embedding_kernel(EmbeddingParams p) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t id = std::int64_t(p.ids[t]) - p.first;
  A* o = static_cast<A*>(p.out) + t * p.hidden;
  if (id < 0 || id >= p.vocab) {
    if (threadIdx.x == 0 && p.rejected != nullptr) atomicAdd(p.rejected, 1u);
    for (std::int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) store(o, i, 0.0f);
    return;
  }
  const W* row = static_cast<const W*>(p.table) + id * p.hidden;
  for (std::int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) store(o, i, load(row, i));
}

}  // namespace

void embedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  require(p.table && p.ids && p.out, "embedding: null pointer");
  require(p.vocab > 0 && p.hidden > 0, "embedding: empty table");
  with_types(p.table_dtype, p.out_dtype, [&](auto* w, auto* a) {
    embedding_kernel<ElementOf<decltype(w)>, ElementOf<decltype(a)>><<<static_cast<unsigned>(p.tokens), 256, 0, stream>>>(p);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace actorlm::kernels::cuda
