#include "kernels/cpu/kv_block_ops.hpp"

#include <cstring>
#include <string>

namespace actorlm::kernels::cpu {

namespace {
void check(std::uint32_t block, const KvCacheLayout& l, const char* what) {
  if (block >= l.num_blocks)
    throw std::out_of_range(std::string(what) + " block " + std::to_string(block) +
                            " outside a cache of " + std::to_string(l.num_blocks) + " blocks");
}
}  // namespace

void copy_blocks(std::byte* cache, const KvCacheLayout& layout, std::span<const BlockPair> pairs) {
  swap_blocks(cache, layout, cache, layout, pairs);
}

void swap_blocks(const std::byte* from, const KvCacheLayout& fl, std::byte* to,
                 const KvCacheLayout& tl, std::span<const BlockPair> pairs) {
  if (fl.num_layers != tl.num_layers || fl.block_bytes != tl.block_bytes)
    throw std::invalid_argument("swap_blocks: caches of different geometry");
  for (const auto& p : pairs) {
    check(p.src, fl, "source");
    check(p.dst, tl, "destination");
  }
  for (std::uint32_t plane = 0; plane < 2 * fl.num_layers; ++plane)
    for (const auto& p : pairs)
      std::memmove(to + tl.offset(plane, p.dst), from + fl.offset(plane, p.src), fl.block_bytes);
}

}  // namespace actorlm::kernels::cpu
