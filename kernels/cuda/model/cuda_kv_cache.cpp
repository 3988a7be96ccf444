#include "kernels/cuda/model/cuda_kv_cache.hpp"

#include "kernels/cuda/cuda_check.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace actorlm::kernels::cuda {

std::size_t CudaKvCache::bytes_per_block(std::uint32_t layers, std::int32_t kv_heads, std::int32_t head_dim,
                                         std::uint32_t block_size, ActDtype dtype) {
  return std::size_t(layers) * 2 * std::size_t(kv_heads) * std::size_t(head_dim) * block_size * act_bytes(dtype);
}

CudaKvCache::CudaKvCache(std::uint32_t layers, std::int32_t kv_heads, std::int32_t head_dim, std::uint32_t block_size,
                         std::uint32_t device_blocks, std::uint32_t host_blocks, ActDtype dtype)
    : kv_heads_(kv_heads), head_dim_(head_dim), block_size_(block_size), dtype_(dtype) {
  const std::size_t block_bytes = std::size_t(kv_heads) * std::size_t(head_dim) * block_size * act_bytes(dtype);
  device_ = {layers, device_blocks, block_bytes};
  host_ = {layers, host_blocks, block_bytes};
  data_.reserve(device_.total_bytes(), "the KV cache (" + std::to_string(device_blocks) + " blocks)");
  if (host_blocks > 0) host_data_.reserve(host_.total_bytes(), "the KV swap space");
  try {
    ACTORLM_CUDA_CHECK(cudaStreamCreateWithFlags(&swap_stream_, cudaStreamNonBlocking));
    ACTORLM_CUDA_CHECK(cudaEventCreateWithFlags(&issued_, cudaEventDisableTiming));
    layer_swapped_.reserve(layers);
    for (std::uint32_t l = 0; l < layers; ++l) {
      cudaEvent_t e = nullptr;
      ACTORLM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      layer_swapped_.push_back(e);
    }
  } catch (...) {
    release();  // what was made so far; the buffers free themselves
    throw;
  }
}

CudaKvCache::~CudaKvCache() { release(); }

void CudaKvCache::release() {
  if (swap_stream_ != nullptr) cudaStreamSynchronize(swap_stream_);  // before the buffers go
  for (cudaEvent_t e : layer_swapped_) cudaEventDestroy(e);
  layer_swapped_.clear();
  if (issued_ != nullptr) cudaEventDestroy(std::exchange(issued_, nullptr));
  if (swap_stream_ != nullptr) cudaStreamDestroy(std::exchange(swap_stream_, nullptr));
}

void CudaKvCache::check(std::span<const BlockPair> pairs, std::uint32_t src_blocks, std::uint32_t dst_blocks,
                        const char* what) const {
  for (const BlockPair& p : pairs)
    if (p.src >= src_blocks || p.dst >= dst_blocks)
      throw std::out_of_range(std::string("KV cache ") + what + ": block pair " + std::to_string(p.src) + " -> " +
                              std::to_string(p.dst) + " outside the cache (" + std::to_string(src_blocks) + " -> " +
                              std::to_string(dst_blocks) + " blocks)");
}

void CudaKvCache::copy(std::span<const BlockPair> pairs, cudaStream_t stream) {
  if (pairs.empty()) return;
  check(pairs, device_.num_blocks, device_.num_blocks, "copy");
  wait_swaps(stream);
  pairs_.reserve(pairs.size_bytes(), "block copy pairs");
  // Pageable source: the copy is staged before cudaMemcpyAsync returns, so `pairs` may go.
  ACTORLM_CUDA_CHECK(cudaMemcpyAsync(pairs_.get(), pairs.data(), pairs.size_bytes(), cudaMemcpyHostToDevice, stream));
  copy_blocks({static_cast<std::byte*>(data_.get()), device_, pairs_.as<BlockPair>(),
               static_cast<std::uint32_t>(pairs.size())},
              stream);
}

void CudaKvCache::apply(std::span<const BlockPair> out, std::span<const BlockPair> in,
                        std::span<const BlockPair> copies, cudaStream_t stream) {
  check(out, device_.num_blocks, host_.num_blocks, "swap out");
  check(in, host_.num_blocks, device_.num_blocks, "swap in");
  check(copies, device_.num_blocks, device_.num_blocks, "copy");
  swap(out, in, stream);
  copy(copies, stream);
}

void CudaKvCache::swap(std::span<const BlockPair> out, std::span<const BlockPair> in, cudaStream_t after) {
  check(out, device_.num_blocks, host_.num_blocks, "swap out");
  check(in, host_.num_blocks, device_.num_blocks, "swap in");
  if ((out.empty() && in.empty()) || device_.num_layers == 0) return;
  ACTORLM_CUDA_CHECK(cudaEventRecord(issued_, after));
  ACTORLM_CUDA_CHECK(cudaStreamWaitEvent(swap_stream_, issued_, 0));
  auto* device = static_cast<std::byte*>(data_.get());
  auto* host = host_data_.as<std::byte>();
  try {
    for (std::uint32_t l = 0; l < device_.num_layers; ++l) {
      swap_layer_blocks(device, device_, host, host_, out.data(), out.size(), l, cudaMemcpyDeviceToHost,
                        swap_stream_);
      swap_layer_blocks(host, host_, device, device_, in.data(), in.size(), l, cudaMemcpyHostToDevice,
                        swap_stream_);
      ACTORLM_CUDA_CHECK(cudaEventRecord(layer_swapped_[l], swap_stream_));
    }
  } catch (...) {
    // Some layers' copies are queued and their events not all recorded: let them finish, so that
    // nothing is left for the forward to wait for.
    cudaStreamSynchronize(swap_stream_);
    throw;
  }
  swaps_pending_ = true;
}

void CudaKvCache::wait_layer(std::uint32_t layer, cudaStream_t stream) const {
  if (swaps_pending_) ACTORLM_CUDA_CHECK(cudaStreamWaitEvent(stream, layer_swapped_.at(layer), 0));
}

void CudaKvCache::wait_swaps(cudaStream_t stream) {
  if (!swaps_pending_) return;
  ACTORLM_CUDA_CHECK(cudaStreamWaitEvent(stream, layer_swapped_.back(), 0));
  swaps_pending_ = false;
}

}  // namespace actorlm::kernels::cuda
