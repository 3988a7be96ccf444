// Block copy and swap on host memory against a cache of known contents.
#define BOOST_TEST_MODULE kv_block_ops_cpu
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/kv_block_ops.hpp"

#include <vector>

using namespace actorlm::kernels;

namespace {
// Every byte names its plane and block, so a misplaced copy shows.
std::vector<std::byte> labelled(const KvCacheLayout& l, int salt) {
  std::vector<std::byte> v(l.total_bytes());
  for (std::uint32_t plane = 0; plane < 2 * l.num_layers; ++plane)
    for (std::uint32_t b = 0; b < l.num_blocks; ++b)
      for (std::size_t i = 0; i < l.block_bytes; ++i)
        v[l.offset(plane, b) + i] = std::byte((plane * 31 + b * 7 + i + salt) & 0xff);
  return v;
}

bool same_block(const std::vector<std::byte>& a, const KvCacheLayout& la, std::uint32_t ba,
                const std::vector<std::byte>& b, const KvCacheLayout& lb, std::uint32_t bb) {
  for (std::uint32_t plane = 0; plane < 2 * la.num_layers; ++plane)
    if (!std::equal(a.begin() + la.offset(plane, ba), a.begin() + la.offset(plane, ba) + la.block_bytes,
                    b.begin() + lb.offset(plane, bb)))
      return false;
  return true;
}
}  // namespace

BOOST_AUTO_TEST_CASE(copy_blocks_copies_every_layer_of_k_and_v_and_nothing_else) {
  const KvCacheLayout l{3, 6, 40};
  auto cache = labelled(l, 0);
  const auto before = cache;
  const BlockPair pairs[] = {{1, 4}, {2, 5}};
  cpu::copy_blocks(cache.data(), l, pairs);
  BOOST_TEST(same_block(cache, l, 4, before, l, 1));
  BOOST_TEST(same_block(cache, l, 5, before, l, 2));
  for (std::uint32_t b : {0u, 1u, 2u, 3u}) BOOST_TEST(same_block(cache, l, b, before, l, b));
}

BOOST_AUTO_TEST_CASE(swap_blocks_moves_between_caches_of_different_sizes) {
  const KvCacheLayout device{2, 8, 24}, host{2, 3, 24};
  auto d = labelled(device, 0);
  auto h = labelled(host, 99);
  const BlockPair out[] = {{7, 0}, {3, 2}};
  cpu::swap_blocks(d.data(), device, h.data(), host, out);
  BOOST_TEST(same_block(h, host, 0, d, device, 7));
  BOOST_TEST(same_block(h, host, 2, d, device, 3));
}

BOOST_AUTO_TEST_CASE(rejects_a_block_id_outside_the_cache) {
  const KvCacheLayout l{1, 4, 8};
  auto cache = labelled(l, 0);
  const BlockPair bad[] = {{1, 4}};
  BOOST_CHECK_THROW(cpu::copy_blocks(cache.data(), l, bad), std::out_of_range);
}
