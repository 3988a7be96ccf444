#include "kernels/cuda/model/cuda_kv_cache.hpp"

#include "kernels/cuda/cuda_check.hpp"

#include <stdexcept>
#include <string>

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
  pairs_.reserve(pairs.size_bytes(), "block copy pairs");
  // Pageable source: the copy is staged before cudaMemcpyAsync returns, so `pairs` may go.
  ACTORLM_CUDA_CHECK(cudaMemcpyAsync(pairs_.get(), pairs.data(), pairs.size_bytes(), cudaMemcpyHostToDevice, stream));
  copy_blocks({static_cast<std::byte*>(data_.get()), device_, pairs_.as<BlockPair>(),
               static_cast<std::uint32_t>(pairs.size())},
              stream);
}

void CudaKvCache::swap_out(std::span<const BlockPair> pairs, cudaStream_t stream) {
  if (pairs.empty()) return;
  check(pairs, device_.num_blocks, host_.num_blocks, "swap out");
  swap_blocks(static_cast<const std::byte*>(data_.get()), device_, host_data_.as<std::byte>(), host_, pairs.data(),
              pairs.size(), cudaMemcpyDeviceToHost, stream);
}

void CudaKvCache::swap_in(std::span<const BlockPair> pairs, cudaStream_t stream) {
  if (pairs.empty()) return;
  check(pairs, host_.num_blocks, device_.num_blocks, "swap in");
  swap_blocks(host_data_.as<std::byte>(), host_, static_cast<std::byte*>(data_.get()), device_, pairs.data(),
              pairs.size(), cudaMemcpyHostToDevice, stream);
}

}  // namespace actorlm::kernels::cuda
