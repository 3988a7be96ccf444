#pragma once
// Block copy (copy-on-write) and swap on the GPU: the cuda backend's side of the block
// manager's requests. Same semantics as kernels/cpu/kv_block_ops.hpp, the reference.

#include "kernels/kv_cache_layout.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace actorlm::kernels::cuda {

struct CopyBlocksParams {
  std::byte* cache = nullptr;          // device: [num_layers, 2, num_blocks, block_bytes]
  KvCacheLayout layout;
  const BlockPair* pairs = nullptr;    // device: [num_pairs]
  std::uint32_t num_pairs = 0;
};

// One launch copies every (layer, K/V, pair); pairs must not overlap (a dst is nobody's src),
// which the block manager guarantees: each copy-on-write takes a fresh block.
void copy_blocks(const CopyBlocksParams&, cudaStream_t stream);

// Compiled as C++17 (CMake 3.25 has no CUDA20 dialect): no std::span here.
// Swap between a host cache (pinned memory for async copies) and a device cache:
// direction cudaMemcpyHostToDevice (swap in) or cudaMemcpyDeviceToHost (swap out). Every layer;
// std::invalid_argument for caches of different geometry, std::out_of_range for a block outside
// its cache.
void swap_blocks(const std::byte* from, const KvCacheLayout& from_layout, std::byte* to,
                 const KvCacheLayout& to_layout, const BlockPair* pairs, std::size_t num_pairs,
                 cudaMemcpyKind direction, cudaStream_t stream);
// The same for one layer's K and V planes, unchecked (swap_blocks and CudaKvCache check first):
// one copy per plane and run of pairs whose sources and destinations both follow on.
void swap_layer_blocks(const std::byte* from, const KvCacheLayout& from_layout, std::byte* to,
                       const KvCacheLayout& to_layout, const BlockPair* pairs, std::size_t num_pairs,
                       std::uint32_t layer, cudaMemcpyKind direction, cudaStream_t stream);

}  // namespace actorlm::kernels::cuda
