// Dequantization against ggml's reference (the gguf Python package's numpy dequantizers, through
// fixtures/dequant.json), and f16 / bf16 conversion of every one of the 65536 bit patterns
// against the IEEE definitions.
#define BOOST_TEST_MODULE model_format_dequantize
#include "model/format/dequantize.hpp"

#include "tests/model/format/dequant_fixture.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

using namespace actorlm::model;
namespace data = boost::unit_test::data;

namespace {

const auto& fixture() {
  static const auto f = test::load_dequant_fixture();
  return f;
}

struct DtypeRow {
  const char* key;  // in dequant.json
  DType dtype;
  std::int64_t block;
  std::uint64_t block_bytes;
};
std::ostream& operator<<(std::ostream& o, const DtypeRow& r) { return o << r.key; }

const std::vector<DtypeRow> dtypes = {
    {"f32", DType::f32, 1, 4},     {"f16", DType::f16, 1, 2},     {"bf16", DType::bf16, 1, 2},
    {"q8_0", DType::q8_0, 32, 34}, {"q4_0", DType::q4_0, 32, 18}, {"q4_1", DType::q4_1, 32, 20}};

// IEEE half precision by definition: (-1)^s * 2^(e-15) * 1.m, subnormals 2^-14 * 0.m.
float f16_reference(std::uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float sign = s ? -1.0f : 1.0f;
  if (e == 0x1f) return m == 0 ? sign * std::numeric_limits<float>::infinity()
                               : std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  return sign * std::ldexp(static_cast<float>(m + 1024), e - 25);
}

constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();
// storage_bytes with std::nullopt as `none`, for printable comparisons.
std::uint64_t bytes_of(DType t, std::int64_t n) { return storage_bytes(t, n).value_or(none); }

}  // namespace

BOOST_DATA_TEST_CASE(dequantizes_every_golden_block_exactly_as_ggml, data::make(dtypes), row) {
  const auto it = fixture().find(row.key);
  BOOST_REQUIRE(it != fixture().end());
  BOOST_REQUIRE(!it->second.empty());
  for (const test::DequantCase& c : it->second) {
    BOOST_TEST_CONTEXT(row.key << " case " << c.name) {
      const auto n = static_cast<std::int64_t>(c.expected.size());
      BOOST_TEST_REQUIRE(bytes_of(row.dtype, n) == c.bytes.size());
      std::vector<float> out(c.expected.size(), -12345.0f);
      dequantize(row.dtype, c.bytes.data(), out);
      for (std::size_t i = 0; i < out.size(); ++i) {
        BOOST_TEST_CONTEXT("value " << i) {
          BOOST_TEST(test::same_float(out[i], c.expected[i]),
                     "got " << out[i] << ", ggml gives " << c.expected[i]);
        }
      }
    }
  }
}

BOOST_DATA_TEST_CASE(sizes_blocks_as_ggml_and_rejects_partial_blocks, data::make(dtypes), row) {
  BOOST_TEST(block_elements(row.dtype) == row.block);
  BOOST_TEST(bytes_of(row.dtype, 0) == 0u);
  BOOST_TEST(bytes_of(row.dtype, row.block * 7) == row.block_bytes * 7);
  BOOST_TEST(bytes_of(row.dtype, -row.block) == none);
  if (row.block > 1) BOOST_TEST(bytes_of(row.dtype, row.block + 1) == none);
  // Element counts near 2^63: a byte count when it fits in 64 bits, none when it does not
  // (only f32 can get there: 2^62 values are 2^64 bytes).
  const std::int64_t most = std::numeric_limits<std::int64_t>::max() / row.block * row.block;
  const bool fits = static_cast<std::uint64_t>(most / row.block) <= none / row.block_bytes;
  BOOST_TEST(fits == (row.dtype != DType::f32));
  if (fits)
    BOOST_TEST(bytes_of(row.dtype, most) ==
               static_cast<std::uint64_t>(most / row.block) * row.block_bytes);
  else BOOST_TEST(bytes_of(row.dtype, most) == none);
  BOOST_TEST(bytes_of(DType::f32, std::int64_t{1} << 62) == none);
  BOOST_TEST(bytes_of(DType::f32, (std::int64_t{1} << 62) - 1) == none - 3);
}

BOOST_AUTO_TEST_CASE(converts_every_f16_bit_pattern_by_the_ieee_definition) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_to_f32(static_cast<std::uint16_t>(h));
    const float want = f16_reference(static_cast<std::uint16_t>(h));
    if (std::isnan(want)) {
      BOOST_TEST_REQUIRE(std::isnan(got), "f16 " << h);
      // The sign and payload survive: converting back by truncation gives the same bits.
      const auto bits = std::bit_cast<std::uint32_t>(got);
      BOOST_TEST_REQUIRE(((bits >> 16) & 0x8000u) == (h & 0x8000u), "f16 " << h);
      BOOST_TEST_REQUIRE(((bits >> 13) & 0x3ffu) == (h & 0x3ffu), "f16 " << h);
    } else {
      BOOST_TEST_REQUIRE(std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want),
                         "f16 " << h << ": got " << got << ", want " << want);
    }
  }
}

BOOST_AUTO_TEST_CASE(converts_every_bf16_bit_pattern_to_the_top_half_of_an_f32) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float got = bf16_to_f32(static_cast<std::uint16_t>(h));
    BOOST_TEST_REQUIRE(std::bit_cast<std::uint32_t>(got) == h << 16, "bf16 " << h);
  }
}

BOOST_AUTO_TEST_CASE(reads_four_bit_codes_low_nibbles_first) {
  // Q4_0 with scale 1: byte j holds value j (low nibble) and value j + 16 (high nibble).
  std::vector<std::byte> block(18);
  block[1] = std::byte{0x3c};  // f16 1.0, little-endian
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<std::byte>(j | ((15 - j) << 4));
  std::vector<float> out(32);
  dequantize(DType::q4_0, block.data(), out);
  for (int j = 0; j < 16; ++j) {
    BOOST_TEST(out[j] == static_cast<float>(j - 8));
    BOOST_TEST(out[j + 16] == static_cast<float>(15 - j - 8));
  }
}
