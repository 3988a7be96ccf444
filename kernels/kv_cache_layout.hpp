#pragma once
// Layout of a paged KV cache in one memory (device or host), shared by the cpu and cuda kernels:
//   [num_layers, 2 (K, V), num_blocks, block_bytes]
// where block_bytes = block_size * num_kv_heads * head_dim * sizeof(element). The kernels
// that copy or swap blocks do not care about the element type.

#include <cstddef>
#include <cstdint>

namespace actorlm::kernels {

struct KvCacheLayout {
  std::uint32_t num_layers = 0;
  std::uint32_t num_blocks = 0;
  std::size_t block_bytes = 0;

  std::size_t plane_bytes() const { return std::size_t(num_blocks) * block_bytes; }  // one K or V
  std::size_t total_bytes() const { return std::size_t(num_layers) * 2 * plane_bytes(); }
  // Byte offset of block `b` in plane `p` (p = 2 * layer + {0: K, 1: V}).
  std::size_t offset(std::uint32_t plane, std::uint32_t block) const {
    return std::size_t(plane) * plane_bytes() + std::size_t(block) * block_bytes;
  }
};

// A pair of block ids: copy-on-write (both on the device) or swap (host <-> device).
struct BlockPair {
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
};

}  // namespace actorlm::kernels
