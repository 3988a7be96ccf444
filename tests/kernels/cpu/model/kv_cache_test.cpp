// The cpu KV cache in either dtype: an f16 block takes half the bytes of an f32 one, and
// copy-on-write copies and swaps to host and back move a block's K and V of every layer bit
// for bit (they copy bytes by layout, whatever the element).
#define BOOST_TEST_MODULE kv_cache
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "tests/kernels/cpu/model/model_fixture.hpp"

#include <cstring>

using namespace actorlm;
using namespace actorlm::kernels::cpu;
using actorlm::kernels::BlockPair;

namespace actorlm::kernels::cpu {
std::ostream& operator<<(std::ostream& o, KvDtype d) { return o << to_string(d); }
}  // namespace actorlm::kernels::cpu

namespace {

const KvDtype dtypes[] = {KvDtype::f32, KvDtype::f16};
constexpr std::uint32_t block_size = 4;

// Bytes of one block: every layer's K and V planes' slice for it, concatenated.
std::vector<std::byte> block_bytes(KvCache& c, std::uint32_t block, const model::Architecture& arch) {
  std::vector<std::byte> out;
  for (std::int32_t l = 0; l < static_cast<std::int32_t>(arch.layers); ++l)
    for (const KvPlaneView p : {c.k(l), c.v(l)}) {
      const std::size_t n = p.block_elements() * kv_element_bytes(p.dtype);
      const std::byte* b = p.data + std::size_t(block) * n;
      out.insert(out.end(), b, b + n);
    }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_f16_block_takes_half_the_bytes_of_an_f32_one) {
  const auto m = actorlm::testing::load_model("llama.gguf");
  const auto f32 = KvCache::bytes_per_block(m.spec, m.weights.heads, 16, KvDtype::f32);
  BOOST_TEST(KvCache::bytes_per_block(m.spec, m.weights.heads, 16, KvDtype::f16) * 2 == f32);
  BOOST_TEST(f32 == 2u * m.spec.layers * m.weights.heads.kv_heads * 16u * m.spec.head_dim * sizeof(float));
}

BOOST_DATA_TEST_CASE(copied_and_swapped_blocks_keep_their_bits, boost::unit_test::data::make(dtypes), dtype) {
  const auto m = actorlm::testing::load_model("llama.gguf");
  KvCache c(m.spec, m.weights.heads, block_size, 8, 3, dtype);
  BOOST_TEST((c.dtype() == dtype));
  // Write positions 0..7 of a sequence on blocks {2, 5}, every layer, random K and V.
  const std::int64_t width = std::int64_t(m.weights.heads.kv_heads) * m.spec.head_dim;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> k(8 * width), v(8 * width);
  const std::vector<std::uint32_t> table{2, 5};
  for (std::int32_t l = 0; l < static_cast<std::int32_t>(m.spec.layers); ++l) {
    for (auto* x : {&k, &v}) std::generate(x->begin(), x->end(), [&] { return nd(rng); });
    write_kv(c.k(l), c.v(l), table, 0, 8, k.data(), v.data(), width);
  }
  const auto b2 = block_bytes(c, 2, m.spec), b5 = block_bytes(c, 5, m.spec);
  BOOST_TEST(b2.size() == KvCache::bytes_per_block(m.spec, m.weights.heads, block_size, dtype));

  c.copy(std::vector<BlockPair>{{5, 7}});                // copy-on-write
  BOOST_TEST((block_bytes(c, 7, m.spec) == b5));
  c.swap_out(std::vector<BlockPair>{{2, 1}, {5, 0}});    // to host
  std::vector<float> junk(8 * width, 3.0f);              // the device blocks reused meanwhile
  for (std::int32_t l = 0; l < static_cast<std::int32_t>(m.spec.layers); ++l)
    write_kv(c.k(l), c.v(l), table, 0, 8, junk.data(), junk.data(), width);
  c.swap_in(std::vector<BlockPair>{{1, 4}, {0, 6}});     // back, elsewhere
  BOOST_TEST((block_bytes(c, 4, m.spec) == b2));
  BOOST_TEST((block_bytes(c, 6, m.spec) == b5));
  BOOST_CHECK_THROW(c.swap_in(std::vector<BlockPair>{{3, 0}}), std::out_of_range);  // host has 3 blocks
}
