#include "kernels/cpu/model/kv_cache.hpp"

#include "kernels/cpu/kv_block_ops.hpp"

namespace actorlm::kernels::cpu {

std::size_t KvCache::bytes_per_block(const model::Architecture& arch, const model::RankShard& heads,
                                     std::uint32_t block_size, KvDtype dtype, std::uint32_t layers) {
  return model::kv_elements_per_token(arch, heads, layers ? layers : arch.layers) * block_size * kv_element_bytes(dtype);
}

KvCache::KvCache(const model::Architecture& arch, const model::RankShard& heads, std::uint32_t block_size,
                 std::uint32_t device_blocks, std::uint32_t host_blocks, KvDtype dtype, std::uint32_t layers)
    : kv_heads_(static_cast<std::int32_t>(heads.kv_heads)),
      head_dim_(static_cast<std::int32_t>(arch.head_dim)),
      block_size_(block_size),
      dtype_(dtype) {
  // One layer's K (or V) plane of one block: [kv_heads, block_size, head_dim].
  const std::size_t block_bytes = std::size_t(heads.kv_heads) * block_size * arch.head_dim * kv_element_bytes(dtype);
  if (layers == 0) layers = arch.layers;
  device_layout_ = {layers, device_blocks, block_bytes};
  host_layout_ = {layers, host_blocks, block_bytes};
  // operator new[] aligns to 16 bytes at least: every row of either dtype starts aligned to its element.
  device_ = std::make_unique_for_overwrite<std::byte[]>(device_layout_.total_bytes());
  host_ = std::make_unique_for_overwrite<std::byte[]>(host_layout_.total_bytes());
}

KvPlaneView KvCache::plane(std::byte* mem, const KvCacheLayout& layout, std::int32_t p) {
  return {mem + layout.offset(static_cast<std::uint32_t>(p), 0), layout.num_blocks, kv_heads_, block_size_, head_dim_,
          dtype_};
}

void KvCache::copy(std::span<const BlockPair> pairs) { copy_blocks(device_.get(), device_layout_, pairs); }

void KvCache::swap_out(std::span<const BlockPair> pairs) {
  swap_blocks(device_.get(), device_layout_, host_.get(), host_layout_, pairs);
}

void KvCache::swap_in(std::span<const BlockPair> pairs) {
  swap_blocks(host_.get(), host_layout_, device_.get(), device_layout_, pairs);
}

}  // namespace actorlm::kernels::cpu
