// Paged attention equals dense causal attention computed independently (in double, over
// contiguous K/V), for random block tables, chunk boundaries and head groupings.
#define BOOST_TEST_MODULE paged_attention
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "tests/support/nan_max.hpp"

#include "kernels/cpu/model/paged_attention.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace actorlm::kernels::cpu;

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
};

}  // namespace

BOOST_DATA_TEST_CASE(paged_attention_equals_dense_causal_attention, boost::unit_test::data::make(cases), c) {
  std::mt19937 rng(c.context * 7 + c.chunk);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::int32_t hd = c.head_dim, kvw = c.kv_heads * hd, qw = c.q_heads * hd;
  std::vector<float> q(std::size_t(c.context) * qw), k(std::size_t(c.context) * kvw), v(k.size());
  for (auto* x : {&q, &k, &v}) std::generate(x->begin(), x->end(), [&] { return nd(rng); });

  // A cache with more blocks than needed, and a shuffled table.
  const std::uint32_t blocks = (c.context + c.block_size - 1) / c.block_size;
  const std::uint32_t num_blocks = blocks * 3 + 1;
  std::vector<std::uint32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0u);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<std::uint32_t> table(ids.begin(), ids.begin() + blocks);
  std::vector<float> kmem(std::size_t(num_blocks) * kvw * c.block_size, NAN), vmem(kmem.size(), NAN);
  const KvPlaneView kp{kmem.data(), num_blocks, c.kv_heads, c.block_size, hd};
  const KvPlaneView vp{vmem.data(), num_blocks, c.kv_heads, c.block_size, hd};

  ThreadPool pool(3);  // heads and rows spread over threads: the same results
  double worst = 0;
  for (std::uint32_t first = 0; first < c.context; first += c.chunk) {
    const std::uint32_t n = std::min(c.chunk, c.context - first);
    write_kv(kp, vp, table, first, n, &k[first * kvw], &v[first * kvw], kvw);
    std::vector<float> out(std::size_t(n) * qw);
    paged_attention(kp, vp, table, first, n, &q[first * qw], qw, c.q_heads,
                    1.0f / std::sqrt(float(hd)), out.data(), &pool);
    const auto ref = dense(std::vector<float>(q.begin() + first * qw, q.end()), k, v, c, first, n);
    for (std::size_t i = 0; i < out.size(); ++i) worst = actorlm::testing::nan_max(worst, std::abs(out[i] - ref[i]));
  }
  BOOST_TEST_MESSAGE(c << ": max abs error " << worst);
  BOOST_TEST(worst < 2e-5);
}

BOOST_AUTO_TEST_CASE(rejects_a_block_table_that_does_not_cover_the_positions) {
  std::vector<float> mem(4 * 2 * 8, 0.0f), q(8, 0.0f), out(8);
  const KvPlaneView p{mem.data(), 4, 1, 2, 8};
  std::vector<std::uint32_t> table{1};
  BOOST_CHECK_THROW(paged_attention(p, p, table, 2, 1, q.data(), 8, 1, 1.0f, out.data()), std::out_of_range);
  std::vector<std::uint32_t> bad{9};
  BOOST_CHECK_THROW(write_kv(p, p, bad, 0, 1, q.data(), q.data(), 8), std::out_of_range);
}
