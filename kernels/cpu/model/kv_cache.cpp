#include "kernels/cpu/model/kv_cache.hpp"

#include "kernels/cpu/kv_block_ops.hpp"

namespace actorlm::kernels::cpu {

std::size_t KvCache::bytes_per_block(const model::Architecture& arch, const model::RankShard& heads,
                                     std::uint32_t block_size) {
  return model::kv_elements_per_token(arch, heads, arch.layers) * block_size * sizeof(float);
}

KvCache::KvCache(const model::Architecture& arch, const model::RankShard& heads, std::uint32_t block_size,
                 std::uint32_t device_blocks, std::uint32_t host_blocks)
    : kv_heads_(static_cast<std::int32_t>(heads.kv_heads)),
      head_dim_(static_cast<std::int32_t>(arch.head_dim)),
      block_size_(block_size) {
  // One layer's K (or V) plane of one block: [kv_heads, block_size, head_dim].
  const std::size_t block_bytes = std::size_t(heads.kv_heads) * block_size * arch.head_dim * sizeof(float);
  device_layout_ = {arch.layers, device_blocks, block_bytes};
  host_layout_ = {arch.layers, host_blocks, block_bytes};
  device_ = std::make_unique_for_overwrite<float[]>(device_layout_.total_bytes() / sizeof(float));
  host_ = std::make_unique_for_overwrite<float[]>(host_layout_.total_bytes() / sizeof(float));
}

KvPlaneView KvCache::plane(float* mem, const KvCacheLayout& layout, std::int32_t p) {
  auto* base = reinterpret_cast<std::byte*>(mem) + layout.offset(static_cast<std::uint32_t>(p), 0);
  return {reinterpret_cast<float*>(base), layout.num_blocks, kv_heads_, block_size_, head_dim_};
}

void KvCache::copy(std::span<const BlockPair> pairs) {
  copy_blocks(reinterpret_cast<std::byte*>(device_.get()), device_layout_, pairs);
}

void KvCache::swap_out(std::span<const BlockPair> pairs) {
  swap_blocks(reinterpret_cast<const std::byte*>(device_.get()), device_layout_,
              reinterpret_cast<std::byte*>(host_.get()), host_layout_, pairs);
}

void KvCache::swap_in(std::span<const BlockPair> pairs) {
  swap_blocks(reinterpret_cast<const std::byte*>(host_.get()), host_layout_,
              reinterpret_cast<std::byte*>(device_.get()), device_layout_, pairs);
}

}  // namespace actorlm::kernels::cpu
