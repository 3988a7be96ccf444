#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kv_block_ops.hpp"

#include <cstdint>
#include <stdexcept>

namespace actorlm::kernels::cuda {

namespace {

// grid: (num_pairs, 2 * num_layers); each thread block copies one block of one plane.
// Copies 16 bytes at a time when the block size and base pointer allow it.
__global__ void copy_blocks_kernel(CopyBlocksParams p) {
  const BlockPair pair = p.pairs[blockIdx.x];
  const std::size_t plane = blockIdx.y;
  const std::size_t plane_bytes = std::size_t(p.layout.num_blocks) * p.layout.block_bytes;
  const std::byte* src = p.cache + plane * plane_bytes + std::size_t(pair.src) * p.layout.block_bytes;
  std::byte* dst = p.cache + plane * plane_bytes + std::size_t(pair.dst) * p.layout.block_bytes;
  const bool vec = p.layout.block_bytes % sizeof(uint4) == 0 &&
                   reinterpret_cast<std::uintptr_t>(p.cache) % alignof(uint4) == 0;
  if (vec) {
    const auto* s = reinterpret_cast<const uint4*>(src);
    auto* d = reinterpret_cast<uint4*>(dst);
    for (std::size_t i = threadIdx.x; i < p.layout.block_bytes / sizeof(uint4); i += blockDim.x)
      d[i] = s[i];
  } else {
    for (std::size_t i = threadIdx.x; i < p.layout.block_bytes; i += blockDim.x) dst[i] = src[i];
  }
}

}  // namespace

void copy_blocks(const CopyBlocksParams& p, cudaStream_t stream) {
  if (p.num_pairs == 0) return;
  const dim3 grid(p.num_pairs, 2 * p.layout.num_layers);
  copy_blocks_kernel<<<grid, 256, 0, stream>>>(p);
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void swap_blocks(const std::byte* from, const KvCacheLayout& fl, std::byte* to,
                 const KvCacheLayout& tl, const BlockPair* pairs, std::size_t num_pairs,
                 cudaMemcpyKind direction, cudaStream_t stream) {
  if (fl.num_layers != tl.num_layers || fl.block_bytes != tl.block_bytes)
    throw std::invalid_argument("swap_blocks: caches of different geometry");
  for (std::size_t i = 0; i < num_pairs; ++i)
    if (pairs[i].src >= fl.num_blocks || pairs[i].dst >= tl.num_blocks)
      throw std::out_of_range("swap_blocks: block id outside the cache");
  for (std::uint32_t layer = 0; layer < fl.num_layers; ++layer)
    swap_layer_blocks(from, fl, to, tl, pairs, num_pairs, layer, direction, stream);
}

void swap_layer_blocks(const std::byte* from, const KvCacheLayout& fl, std::byte* to, const KvCacheLayout& tl,
                       const BlockPair* pairs, std::size_t num_pairs, std::uint32_t layer,
                       cudaMemcpyKind direction, cudaStream_t stream) {
  for (std::size_t i = 0; i < num_pairs;) {
    std::size_t run = 1;
    while (i + run < num_pairs && pairs[i + run].src == pairs[i].src + run && pairs[i + run].dst == pairs[i].dst + run)
      ++run;
    for (std::uint32_t plane = 2 * layer; plane < 2 * layer + 2; ++plane)
      ACTORLM_CUDA_CHECK(cudaMemcpyAsync(to + tl.offset(plane, pairs[i].dst), from + fl.offset(plane, pairs[i].src),
                                         run * fl.block_bytes, direction, stream));
    i += run;
  }
}

}  // namespace actorlm::kernels::cuda
