// Paged attention equals dense causal attention computed independently (in double, over
// contiguous K/V), for random block tables, chunk boundaries, head groupings and both KV dtypes;
// attention over an f16 cache stays within a derived bound of the same over an f32 one; and a
// row's bits do not depend on the rows attended with it.
#define BOOST_TEST_MODULE paged_attention
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "tests/support/nan_max.hpp"

#include "kernels/cpu/model/half.hpp"
#include "kernels/cpu/model/paged_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

using namespace actorlm::kernels::cpu;

namespace actorlm::kernels::cpu {
std::ostream& operator<<(std::ostream& o, KvDtype d) { return o << to_string(d); }
}  // namespace actorlm::kernels::cpu

namespace {

struct Case {
  std::int32_t q_heads, kv_heads, head_dim;
  std::uint32_t block_size, context, chunk;  // the sequence is written chunk by chunk
};

std::ostream& operator<<(std::ostream& o, const Case& c) {
  return o << c.q_heads << "q/" << c.kv_heads << "kv hd" << c.head_dim << " bs" << c.block_size
           << " ctx" << c.context << " chunk" << c.chunk;
}

// out[t, h, d] for query rows at positions [first, first + n) over keys [0, first + t].
std::vector<double> dense(const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, const Case& c, std::uint32_t first,
                          std::uint32_t n) {
  const std::int32_t hd = c.head_dim, kvw = c.kv_heads * hd, qw = c.q_heads * hd;
  std::vector<double> out(std::size_t(n) * qw);
  for (std::uint32_t t = 0; t < n; ++t)
    for (std::int32_t h = 0; h < c.q_heads; ++h) {
      const std::int32_t g = h * c.kv_heads / c.q_heads;
      const std::uint32_t visible = first + t + 1;
      std::vector<double> s(visible);
      for (std::uint32_t p = 0; p < visible; ++p) {
        double dot = 0;
        for (std::int32_t d = 0; d < hd; ++d)
          dot += double(q[t * qw + h * hd + d]) * k[p * kvw + g * hd + d];
        s[p] = dot / std::sqrt(double(hd));
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - mx));
      for (std::int32_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (std::uint32_t p = 0; p < visible; ++p) acc += s[p] / sum * v[p * kvw + g * hd + d];
        out[t * qw + h * hd + d] = acc;
      }
    }
  return out;
}

const Case cases[] = {
    {4, 4, 16, 4, 37, 37},  {4, 2, 16, 4, 37, 5},  {9, 3, 64, 16, 70, 1},
    {8, 1, 32, 8, 29, 29},  {2, 2, 8, 1, 9, 2},    {6, 3, 16, 16, 100, 17},
    // Longer than attention_chunk_positions: several chunks merged, chunk edges inside prefill
    // chunks, a block size that does not divide the chunk, groups of unequal size (3 / 2).
    {9, 3, 64, 16, 300, 300}, {9, 3, 64, 16, 300, 37}, {4, 1, 32, 5, 290, 1}, {3, 2, 16, 1, 260, 64},
    // A prefill whose chunk partials exceed one call's budget: its rows go in several tiles.
    {64, 1, 16, 16, 600, 600},
};

}  // namespace

namespace {

const KvDtype dtypes[] = {KvDtype::f32, KvDtype::f16};

struct Inputs {
  std::vector<float> q, k, v;   // [context, q_heads * hd], [context, kv_heads * hd] twice
  std::vector<std::uint32_t> table;
  std::uint32_t num_blocks = 0;
};

Inputs random_inputs(const Case& c) {
  std::mt19937 rng(c.context * 7 + c.chunk);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::int32_t kvw = c.kv_heads * c.head_dim, qw = c.q_heads * c.head_dim;
  Inputs in;
  in.q.resize(std::size_t(c.context) * qw);
  in.k.resize(std::size_t(c.context) * kvw);
  in.v.resize(in.k.size());
  for (auto* x : {&in.q, &in.k, &in.v}) std::generate(x->begin(), x->end(), [&] { return nd(rng); });
  // A cache with more blocks than needed, and a shuffled table.
  const std::uint32_t blocks = (c.context + c.block_size - 1) / c.block_size;
  in.num_blocks = blocks * 3 + 1;
  std::vector<std::uint32_t> ids(in.num_blocks);
  std::iota(ids.begin(), ids.end(), 0u);
  std::shuffle(ids.begin(), ids.end(), rng);
  in.table.assign(ids.begin(), ids.begin() + blocks);
  return in;
}

// The sequence written and attended chunk by chunk through a cache of `dtype`: every output row.
std::vector<float> paged(const Inputs& in, const Case& c, KvDtype dtype) {
  const std::int32_t hd = c.head_dim, kvw = c.kv_heads * hd, qw = c.q_heads * hd;
  // Filled with NaN (f32) or 0xffff (an f16 NaN): a read of an unwritten slot shows.
  std::vector<std::byte> kmem(std::size_t(in.num_blocks) * kvw * c.block_size * kv_element_bytes(dtype), std::byte{0xff});
  std::vector<std::byte> vmem(kmem);
  const KvPlaneView kp{kmem.data(), in.num_blocks, c.kv_heads, c.block_size, hd, dtype};
  const KvPlaneView vp{vmem.data(), in.num_blocks, c.kv_heads, c.block_size, hd, dtype};
  ThreadPool pool(3);  // heads and rows spread over threads: the same results
  std::vector<float> out(std::size_t(c.context) * qw);
  for (std::uint32_t first = 0; first < c.context; first += c.chunk) {
    const std::uint32_t n = std::min(c.chunk, c.context - first);
    write_kv(kp, vp, in.table, first, n, &in.k[first * kvw], &in.v[first * kvw], kvw);
    paged_attention(kp, vp, in.table, first, n, &in.q[first * qw], qw, c.q_heads, 1.0f / std::sqrt(float(hd)),
                    &out[first * qw], &pool);
  }
  return out;
}

std::vector<float> rounded_to_half(std::vector<float> x) {
  for (auto& f : x) f = half_to_float(float_to_half(f));
  return x;
}

}  // namespace

BOOST_DATA_TEST_CASE(paged_attention_equals_dense_causal_attention,
                     boost::unit_test::data::make(cases) * boost::unit_test::data::make(dtypes), c, dtype) {
  const Inputs in = random_inputs(c);
  const auto out = paged(in, c, dtype);
  // The dense reference sees what the cache holds: K and V rounded to f16 for an f16 cache.
  const auto k = dtype == KvDtype::f16 ? rounded_to_half(in.k) : in.k;
  const auto v = dtype == KvDtype::f16 ? rounded_to_half(in.v) : in.v;
  const auto ref = dense(in.q, k, v, c, 0, c.context);
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) worst = actorlm::testing::nan_max(worst, std::abs(out[i] - ref[i]));
  BOOST_TEST_MESSAGE(c << " " << dtype << ": max abs error " << worst);
  BOOST_TEST(worst < 2e-5);
}

// Rounding K and V to f16 moves each by at most u = 2^-11 of itself. An output is
// o = sum_c p_c v_c with p = softmax(s), s_c = scale q.k_c, so
//   |do| <= u max|v| (the values) + 2 max_c |ds_c| max|v| (softmax moves each p_c by at most a
//   factor exp(2 max|ds|) - 1 ~ 2 max|ds|), with |ds_c| <= u scale sum_i |q_i k_ci|,
// plus the f32 paths' own rounding (2e-5 above). Measured: 20 to 40 times below it (the bound lines every error up).
BOOST_DATA_TEST_CASE(attention_over_an_f16_cache_stays_within_its_rounding_bound_of_f32,
                     boost::unit_test::data::make(cases), c) {
  const Inputs in = random_inputs(c);
  const auto f32 = paged(in, c, KvDtype::f32);
  const auto f16 = paged(in, c, KvDtype::f16);
  const std::int32_t hd = c.head_dim, kvw = c.kv_heads * hd, qw = c.q_heads * hd;
  const double u = 1.0 / 2048, scale = 1.0 / std::sqrt(double(hd));
  double vmax = 0, dsmax = 0;
  for (float x : in.v) vmax = std::max(vmax, double(std::abs(x)));
  for (std::uint32_t t = 0; t < c.context; ++t)
    for (std::int32_t h = 0; h < c.q_heads; ++h)
      for (std::uint32_t p = 0; p <= t; ++p) {
        const std::int32_t g = h * c.kv_heads / c.q_heads;
        double sum = 0;
        for (std::int32_t d = 0; d < hd; ++d) sum += std::abs(double(in.q[t * qw + h * hd + d]) * in.k[p * kvw + g * hd + d]);
        dsmax = std::max(dsmax, u * scale * sum);
      }
  const double bound = u * vmax + 2 * dsmax * vmax + 2e-5;
  double worst = 0;
  for (std::size_t i = 0; i < f32.size(); ++i) worst = actorlm::testing::nan_max(worst, std::abs(f16[i] - f32[i]));
  BOOST_TEST_MESSAGE(c << ": max |f16 - f32| = " << worst << ", bound " << bound);
  BOOST_TEST(worst > 0.0);  // the cache really rounded
  BOOST_TEST(worst <= bound);
}

// A row's arithmetic does not depend on the rows attended with it (a prefill's rows share work
// items and widened f16 blocks): every row of a chunked prefill has the bits it gets when the
// sequence is attended one row at a time.
BOOST_DATA_TEST_CASE(a_prefill_row_has_the_bits_it_gets_attended_alone,
                     boost::unit_test::data::make(cases) * boost::unit_test::data::make(dtypes), c, dtype) {
  const Inputs in = random_inputs(c);
  Case one = c;
  one.chunk = 1;
  const auto together = paged(in, c, dtype);
  const auto alone = paged(in, one, dtype);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < together.size(); ++i)
    if (std::memcmp(&together[i], &alone[i], sizeof(float)) != 0) ++differ;
  BOOST_TEST(differ == 0u, c << " " << dtype << ": " << differ << " of " << together.size() << " outputs differ");
}

BOOST_AUTO_TEST_CASE(rejects_a_block_table_that_does_not_cover_the_positions) {
  std::vector<float> mem(4 * 2 * 8, 0.0f), q(8, 0.0f), out(8);
  const KvPlaneView p{reinterpret_cast<std::byte*>(mem.data()), 4, 1, 2, 8};
  std::vector<std::uint32_t> table{1};
  BOOST_CHECK_THROW(paged_attention(p, p, table, 2, 1, q.data(), 8, 1, 1.0f, out.data()), std::out_of_range);
  std::vector<std::uint32_t> bad{9};
  BOOST_CHECK_THROW(write_kv(p, p, bad, 0, 1, q.data(), q.data(), 8), std::out_of_range);
}
