#pragma once
// Block copy and swap on host memory: the cpu backend's implementation of the block manager's
// copy-on-write and swap requests, and the reference for the CUDA kernels.

#include "kernels/kv_cache_layout.hpp"

#include <span>
#include <stdexcept>

namespace actorlm::kernels::cpu {

// For every pair, every layer's K and V of block src are copied into block dst.
// Throws std::out_of_range when a block id is outside the layout.
void copy_blocks(std::byte* cache, const KvCacheLayout& layout, std::span<const BlockPair> pairs);

// Moves blocks between two caches of the same geometry (num_blocks may differ).
void swap_blocks(const std::byte* from, const KvCacheLayout& from_layout, std::byte* to,
                 const KvCacheLayout& to_layout, std::span<const BlockPair> pairs);

}  // namespace actorlm::kernels::cpu
