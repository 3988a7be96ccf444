// The GPU draw's math (kernels/cuda/draw_math.hpp) on the host, in every build, against the cpu
// sampler (kernels/cpu/sampling.hpp): the tempered weights bit for bit, the rank keys in the cpu
// sampler's order, and draw_row, driven by a pass that visits the row in a fresh random order
// each time (as the kernel's threads add to their histograms in no fixed order), drawing the cpu
// sampler's token for rows with NaN, +inf, -inf and ties under every mix of temperature, top-k,
// top-p and min-p.
#define BOOST_TEST_MODULE draw_math
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/sampling.hpp"
#include "kernels/cuda/draw_math.hpp"
#include "tests/support/logit_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <span>

namespace m = actorlm::kernels::cuda_math;
namespace cpu = actorlm::kernels::cpu;

namespace {

// draw_row's passes as a plain loop over the row, in a random order per pass.
struct HostPass {
  std::span<const float> row;
  float max, temperature;
  std::mt19937_64& rng;
  std::vector<std::int32_t> order;

  template <class F>
  void each(F f) {
    order.resize(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::int32_t i : order) {
      const float x = m::clean_logit(row[std::size_t(i)]);
      const float w = m::tempered_weight(x, max, temperature);
      if (w > 0) f(m::rank_key(x, i), w);
    }
  }
  void histogram(std::uint64_t floor, std::uint64_t prefix, int bits, int shift, m::DrawHistogram& h) {
    std::fill(std::begin(h.count), std::end(h.count), 0u);
    std::fill(std::begin(h.mass), std::end(h.mass), 0.0);
    each([&](std::uint64_t key, float w) {
      if (!m::under_prefix(key, prefix, bits, floor)) return;
      const int d = int((key >> shift) & (m::kBins - 1));
      ++h.count[d];
      h.mass[d] += w;
    });
  }
  std::uint64_t find(std::uint64_t floor, std::uint64_t prefix, int bits) {
    std::uint64_t found = 0;
    int n = 0;
    each([&](std::uint64_t key, float) {
      if (m::under_prefix(key, prefix, bits, floor)) found = key, ++n;
    });
    BOOST_REQUIRE_EQUAL(n, 1);
    return found;
  }
  m::CountMass at_least(std::uint64_t floor, float min_weight) {
    m::CountMass out{0, 0};
    each([&](std::uint64_t key, float w) {
      if (key >= floor && w >= min_weight) ++out.count, out.mass += w;
    });
    return out;
  }
};

float row_max(std::span<const float> row) {
  float best = -INFINITY;
  for (float x : row) best = std::max(best, m::clean_logit(x));
  return best;
}

}  // namespace

BOOST_AUTO_TEST_CASE(tempered_weights_are_the_cpu_samplers_bit_for_bit) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0, 20);
  std::uniform_real_distribution<float> temp(0.01f, 5.0f);
  std::size_t nonzero = 0;
  for (int i = 0; i < 200000; ++i) {
    const float max = normal(rng);
    float x = std::min(max, max - std::abs(normal(rng)));
    if (i % 97 == 0) x = -INFINITY;
    if (i % 89 == 0) x = max;
    const float t = i % 5 == 0 ? 1.0f : temp(rng);
    const float want = cpu::tempered_weight(x, max, t), got = m::tempered_weight(x, max, t);
    nonzero += want > 0;
    if (std::memcmp(&want, &got, sizeof want) != 0)
      BOOST_FAIL("x " << x << ", max " << max << ", T " << t << ": cpu " << want << ", draw_math " << got);
  }
  BOOST_TEST(m::tempered_weight(3.5f, 3.5f, 0.7f) == 1.0f);  // the best weighs exactly 1
  BOOST_TEST(nonzero > 100000u);                              // most of the cases were not underflows
}

BOOST_AUTO_TEST_CASE(rank_keys_order_tokens_as_the_cpu_sampler_ranks_them) {
  std::mt19937_64 rng(4);
  const float values[] = {-INFINITY, -3.0f, -0.0f, 0.0f, 1e-30f, 2.5f, 2.5000002f, FLT_MAX};
  for (int i = 0; i < 100000; ++i) {
    const float a = values[rng() % 8], b = values[rng() % 8];
    const auto ia = std::int32_t(rng() % 1000), ib = std::int32_t(rng() % 1000);
    if (ia == ib) continue;
    BOOST_TEST_CONTEXT(a << "@" << ia << " vs " << b << "@" << ib) {
      BOOST_TEST((m::rank_key(a, ia) > m::rank_key(b, ib)) == m::ranks_before(a, ia, b, ib));
      BOOST_TEST(m::key_id(m::rank_key(a, ia)) == ia);
    }
  }
}

BOOST_AUTO_TEST_CASE(filtered_draws_pick_the_cpu_samplers_tokens) {
  std::mt19937_64 rng(12);
  const float temperatures[] = {0.05f, 0.3f, 0.7f, 1.0f, 1.6f, 4.0f};
  const float top_ps[] = {1.0f, 0.95f, 0.6f, 0.1f, 1e-6f};
  const float min_ps[] = {0.0f, 0.02f, 0.3f, 1.0f};
  std::size_t draws = 0, rows = 0, distinct_tokens_seen = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t vocab = 1 + rng() % (trial % 10 == 0 ? 40000 : 3000);
    const auto row = actorlm::testing::random_logit_row(rng, vocab);
    const float max = row_max(row);
    if (max == -INFINITY) continue;  // nothing to draw: the stats pass says so before any draw
    cpu::SamplerParams p;
    p.temperature = temperatures[rng() % 6];
    p.top_p = top_ps[rng() % 5];
    p.min_p = min_ps[rng() % 4];
    const std::int32_t top_ks[] = {0, 1, 2, 7, 50, std::int32_t(vocab / 2 + 1), std::int32_t(vocab + 3)};
    p.top_k = top_ks[rng() % 7];
    p.seed = rng();
    std::vector<std::int32_t> seen;
    for (int s = 0; s < 6; ++s) {
      const std::uint64_t stream = rng() % 4, position = rng() % 100000;
      const auto want = cpu::sample(row, p, stream, position);
      HostPass pass{row, max, p.temperature, rng, {}};
      m::DrawHistogram h;
      const m::DrawParams dp{p.top_k, p.top_p, p.min_p,
                             cpu::counter_uniform(p.seed, stream, position)};
      const std::int32_t got = m::draw_row(dp, pass, h);
      BOOST_TEST_CONTEXT("trial " << trial << ", vocab " << vocab << ", T " << p.temperature << ", top_k " << p.top_k
                                  << ", top_p " << p.top_p << ", min_p " << p.min_p << ", draw " << s) {
        BOOST_TEST(got == want.token);
      }
      ++draws;
      if (std::find(seen.begin(), seen.end(), got) == seen.end()) seen.push_back(got);
    }
    distinct_tokens_seen += seen.size();
    ++rows;
  }
  BOOST_TEST(draws > 2000u);
  // The draws were draws: a row's six draws were not one token again and again (as the argmax's).
  BOOST_TEST(distinct_tokens_seen > rows + rows / 4);
}

// Below the first level the bins split one that reached the goal; their masses, summed apart,
// may fall short of it by rounding, and then the last of them ends the prefix. A pass that halves
// every mass below the first level forces that fallback at nearly every level: the draws must
// still be tokens the filters keep.
struct ShavingPass : HostPass {
  void histogram(std::uint64_t floor, std::uint64_t prefix, int bits, int shift, m::DrawHistogram& h) {
    HostPass::histogram(floor, prefix, bits, shift, h);
    if (bits > 0)
      for (double& mass : h.mass) mass *= 0.5;
  }
};

BOOST_AUTO_TEST_CASE(masses_that_fall_short_below_the_first_level_still_draw_a_kept_token) {
  std::mt19937_64 rng(13);
  std::size_t draws = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t vocab = 2 + rng() % 3000;
    const auto row = actorlm::testing::random_logit_row(rng, vocab);
    const float max = row_max(row);
    if (max == -INFINITY) continue;
    const float temperature = 0.5f + float(rng() % 3);
    const std::int32_t top_k = rng() % 2 ? 0 : std::int32_t(1 + rng() % 40);
    ShavingPass pass{{row, max, temperature, rng, {}}};
    m::DrawHistogram h;
    const std::int32_t got = m::draw_row({top_k, 0.8f, 0.01f, double(rng() % 1000) / 1000.0}, pass, h);
    BOOST_TEST_CONTEXT("trial " << trial << ", vocab " << vocab << ", top_k " << top_k) {
      BOOST_REQUIRE(got >= 0);
      BOOST_REQUIRE(std::size_t(got) < vocab);
      const float x = m::clean_logit(row[std::size_t(got)]);
      BOOST_TEST(m::tempered_weight(x, max, temperature) > 0);  // a candidate
      if (top_k > 0) {  // within the top_k by the ranking
        std::int32_t ahead = 0;
        for (std::size_t i = 0; i < vocab; ++i)
          ahead += m::ranks_before(m::clean_logit(row[i]), std::int32_t(i), x, got);
        BOOST_TEST(ahead < top_k);
      }
    }
    ++draws;
  }
  BOOST_TEST(draws > 150u);
}

BOOST_AUTO_TEST_CASE(a_row_without_candidates_draws_nothing) {
  std::mt19937_64 rng(1);
  const std::vector<float> row(100, -INFINITY);
  HostPass pass{row, -INFINITY, 1.0f, rng, {}};
  m::DrawHistogram h;
  for (std::int32_t top_k : {0, 5}) BOOST_TEST(m::draw_row({top_k, 0.9f, 0.1f, 0.5}, pass, h) == -1);
}
