#pragma once
// One rank's paged KV cache on its GPU, and its swap space in pinned host memory, laid out as
// kernels/kv_cache_layout.hpp says ([layers, K/V, blocks, block_bytes]; a block's bytes as the
// cpu cache's: [kv_heads, block_size, head_dim]), so copy_blocks and swap_blocks serve
// copy-on-write and swap, and the attention kernels read a layer's planes.

#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/kv_block_ops.hpp"
#include "kernels/cuda/model/device_buffer.hpp"
#include "kernels/kv_cache_layout.hpp"

#include <span>

namespace actorlm::kernels::cuda {

class CudaKvCache {
 public:
  CudaKvCache(std::uint32_t layers, std::int32_t kv_heads, std::int32_t head_dim, std::uint32_t block_size,
              std::uint32_t device_blocks, std::uint32_t host_blocks, ActDtype dtype);

  // Bytes of one block of every layer (what a block id costs on the device).
  static std::size_t bytes_per_block(std::uint32_t layers, std::int32_t kv_heads, std::int32_t head_dim,
                                     std::uint32_t block_size, ActDtype dtype);

  void* k(std::uint32_t layer) const { return plane(2 * layer); }
  void* v(std::uint32_t layer) const { return plane(2 * layer + 1); }

  // Enqueued on `stream`; block ids checked on the host (std::out_of_range naming the block).
  void copy(std::span<const BlockPair> pairs, cudaStream_t stream);      // device -> device
  void swap_out(std::span<const BlockPair> pairs, cudaStream_t stream);  // device src -> host dst
  void swap_in(std::span<const BlockPair> pairs, cudaStream_t stream);   // host src -> device dst

  std::uint32_t block_size() const { return block_size_; }
  std::uint32_t device_blocks() const { return device_.num_blocks; }
  std::int32_t kv_heads() const { return kv_heads_; }
  std::int32_t head_dim() const { return head_dim_; }
  ActDtype dtype() const { return dtype_; }

 private:
  void* plane(std::uint32_t p) const { return static_cast<std::byte*>(data_.get()) + device_.offset(p, 0); }
  void check(std::span<const BlockPair> pairs, std::uint32_t src_blocks, std::uint32_t dst_blocks, const char* what) const;

  std::int32_t kv_heads_, head_dim_;
  std::uint32_t block_size_;
  ActDtype dtype_;
  KvCacheLayout device_, host_;
  DeviceBuffer data_;
  PinnedBuffer host_data_;
  DeviceBuffer pairs_;  // the copy's block pairs on the device
};

}  // namespace actorlm::kernels::cuda
