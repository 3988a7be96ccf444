#pragma once
// One rank's paged KV cache on its GPU, and its swap space in pinned host memory, laid out as
// kernels/kv_cache_layout.hpp says ([layers, K/V, blocks, block_bytes]; a block's bytes as the
// cpu cache's: [kv_heads, block_size, head_dim]), so copy_blocks and swap_blocks serve
// copy-on-write and swap, and the attention kernels read a layer's planes.
//
// Swaps run on the cache's own stream, layer by layer, with an event after each layer: the
// forward on the shard's stream waits for a layer's swaps just before it touches that layer
// (wait_layer), so the copies of later layers overlap the compute of earlier ones, and the host
// does not wait for them at all. The swap stream first waits for what the shard's stream had
// queued when the swaps were issued (the last step's forward may still read or write the blocks).

#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/kv_block_ops.hpp"
#include "kernels/cuda/model/device_buffer.hpp"
#include "kernels/kv_cache_layout.hpp"

#include <span>
#include <vector>

namespace actorlm::kernels::cuda {

class CudaKvCache {
 public:
  // On the current device (its swap stream too).
  CudaKvCache(std::uint32_t layers, std::int32_t kv_heads, std::int32_t head_dim, std::uint32_t block_size,
              std::uint32_t device_blocks, std::uint32_t host_blocks, ActDtype dtype);
  ~CudaKvCache();
  CudaKvCache(const CudaKvCache&) = delete;
  CudaKvCache& operator=(const CudaKvCache&) = delete;

  // Bytes of one block of every layer (what a block id costs on the device).
  static std::size_t bytes_per_block(std::uint32_t layers, std::int32_t kv_heads, std::int32_t head_dim,
                                     std::uint32_t block_size, ActDtype dtype);

  void* k(std::uint32_t layer) const { return plane(2 * layer); }
  void* v(std::uint32_t layer) const { return plane(2 * layer + 1); }

  // Block ids checked on the host first (std::out_of_range naming the block).
  // A step's block moves in the block manager's order: swap(out, in, stream), then copy(copies,
  // stream), every id checked before anything is enqueued.
  void apply(std::span<const BlockPair> out, std::span<const BlockPair> in, std::span<const BlockPair> copies,
             cudaStream_t stream);
  // Device -> device, enqueued on `stream` after the swaps not yet waited for (a copy may read a
  // block just swapped in).
  void copy(std::span<const BlockPair> pairs, cudaStream_t stream);
  // Swaps out (device src -> host dst), then in (host src -> device dst), on the swap stream
  // after the work `after` has queued so far: layer by layer, each layer's planes out, then in.
  void swap(std::span<const BlockPair> out, std::span<const BlockPair> in, cudaStream_t after);
  // `stream` waits for the swaps' copies of `layer` (of every layer: wait_swaps, after which they
  // count as waited for). Nothing to wait for: nothing enqueued. Not during a stream capture.
  void wait_layer(std::uint32_t layer, cudaStream_t stream) const;
  void wait_swaps(cudaStream_t stream);
  bool swaps_pending() const { return swaps_pending_; }

  std::uint32_t block_size() const { return block_size_; }
  std::uint32_t device_blocks() const { return device_.num_blocks; }
  std::int32_t kv_heads() const { return kv_heads_; }
  std::int32_t head_dim() const { return head_dim_; }
  ActDtype dtype() const { return dtype_; }

 private:
  void* plane(std::uint32_t p) const { return static_cast<std::byte*>(data_.get()) + device_.offset(p, 0); }
  void release();  // the swap stream (synchronised first) and the events
  void check(std::span<const BlockPair> pairs, std::uint32_t src_blocks, std::uint32_t dst_blocks, const char* what) const;

  std::int32_t kv_heads_, head_dim_;
  std::uint32_t block_size_;
  ActDtype dtype_;
  KvCacheLayout device_, host_;
  DeviceBuffer data_;
  PinnedBuffer host_data_;
  DeviceBuffer pairs_;  // the copy's block pairs on the device
  cudaStream_t swap_stream_ = nullptr;
  cudaEvent_t issued_ = nullptr;          // on the shard's stream, where the swaps were issued
  std::vector<cudaEvent_t> layer_swapped_;  // on the swap stream, after each layer's copies
  bool swaps_pending_ = false;            // swaps issued and not yet waited for by wait_swaps
};

}  // namespace actorlm::kernels::cuda
