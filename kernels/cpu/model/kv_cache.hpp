#pragma once
// The cpu backend's paged KV cache for one tensor-parallel rank: a device cache the attention
// reads and writes, and a host cache for swapped-out blocks, both in the shared layout of
// kernels/kv_cache_layout.hpp with elements of one KvDtype (float, or f16 at half the bytes), a
// block being [kv_heads, block_size, head_dim]. Copies and swaps move bytes whatever the dtype.
// A layer split's stage holds its own layers only: `layers` (0: all of the model's), indexed
// from 0 at the stage's first.

#include "kernels/cpu/model/paged_attention.hpp"
#include "kernels/cpu/model/weights.hpp"
#include "kernels/kv_cache_layout.hpp"

#include <memory>
#include <span>

namespace actorlm::kernels::cpu {

class KvCache {
 public:
  KvCache(const model::Architecture& arch, const model::RankShard& heads, std::uint32_t block_size,
          std::uint32_t device_blocks, std::uint32_t host_blocks, KvDtype dtype = KvDtype::f32,
          std::uint32_t layers = 0);

  // Bytes one block takes on one rank, over its layers (0: all), K and V.
  static std::size_t bytes_per_block(const model::Architecture& arch, const model::RankShard& heads,
                                     std::uint32_t block_size, KvDtype dtype = KvDtype::f32,
                                     std::uint32_t layers = 0);

  KvPlaneView k(std::int32_t layer) { return plane(device_.get(), device_layout_, 2 * layer); }
  KvPlaneView v(std::int32_t layer) { return plane(device_.get(), device_layout_, 2 * layer + 1); }
  std::uint32_t block_size() const { return block_size_; }
  KvDtype dtype() const { return dtype_; }
  std::uint32_t device_blocks() const { return device_layout_.num_blocks; }
  std::uint32_t host_blocks() const { return host_layout_.num_blocks; }

  // Copy-on-write copies within the device cache; swaps between device and host.
  // Throw std::out_of_range for a block outside its cache.
  void copy(std::span<const BlockPair> pairs);
  void swap_out(std::span<const BlockPair> device_to_host);
  void swap_in(std::span<const BlockPair> host_to_device);

 private:
  KvPlaneView plane(std::byte* mem, const KvCacheLayout& layout, std::int32_t p);
  std::int32_t kv_heads_, head_dim_;  // this rank's
  std::uint32_t block_size_;
  KvDtype dtype_;
  KvCacheLayout device_layout_, host_layout_;
  // Left uninitialized: pages are committed as blocks are first written, so a large budget
  // costs address space, not memory, until it is used.
  std::unique_ptr<std::byte[]> device_, host_;
};

}  // namespace actorlm::kernels::cpu
