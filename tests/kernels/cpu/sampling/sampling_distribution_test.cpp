// What the sampler draws, statistically and by support: empirical frequencies against the
// reference distribution (chi-square at the 0.1% level, fixed seeds so every run is the same),
// and the exact set of tokens each filter lets through, found by drawing over many positions.
#define BOOST_TEST_MODULE sampling_distribution_cpu
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/sampling.hpp"
#include "tests/kernels/cpu/sampling/reference.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

using namespace actorlm::kernels::cpu;
namespace bdata = boost::unit_test::data;

namespace {
constexpr int kDraws = 20000;

// Token counts of `draws` draws at positions 0..draws-1 of one stream.
std::vector<int> histogram(const std::vector<float>& row, const SamplerParams& p, int draws,
                           uint64_t stream = 0) {
  std::vector<int> counts(row.size(), 0);
  for (int pos = 0; pos < draws; ++pos) ++counts[std::size_t(sample(row, p, stream, pos).token)];
  return counts;
}

std::set<int> drawn(const std::vector<int>& counts) {
  std::set<int> s;
  for (std::size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > 0) s.insert(int(i));
  return s;
}

void check_matches(const std::vector<float>& row, const SamplerParams& p) {
  const auto prob = reference::filtered(row, p);
  const auto counts = histogram(row, p, kDraws);
  const auto support = reference::support(prob);
  BOOST_TEST_REQUIRE(support.size() >= 2u);
  for (std::size_t i = 0; i < counts.size(); ++i)
    if (prob[i] == 0)
      BOOST_TEST_REQUIRE(counts[i] == 0, "token " << i << " is outside the kept set");
  const double stat = reference::chi_square(counts, prob, kDraws);
  const double critical = reference::chi_square_critical_999(int(support.size()) - 1);
  BOOST_TEST(stat < critical, "chi-square " << stat << " >= " << critical);
}

// Probabilities 0.05, 0.4, 0.1, 0.3, 0.15: ranked 1, 3, 4, 2, 0, cumulative .4 .7 .85 .95 1.
std::vector<float> crafted_row() {
  std::vector<float> row;
  for (double q : {0.05, 0.4, 0.1, 0.3, 0.15}) row.push_back(float(std::log(q)));
  return row;
}

SamplerParams params(float temperature, int32_t top_k, float top_p, float min_p,
                     uint64_t seed = 17) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}
}  // namespace

BOOST_DATA_TEST_CASE(empirical_frequencies_match_the_tempered_softmax,
                     bdata::make({0.5f, 1.0f, 2.0f}) * bdata::make({8, 300}), temperature, vocab) {
  std::mt19937 rng{uint32_t(vocab)};
  // Ranges keep every expected count >= 5 for the chi-square approximation.
  const auto row =
      reference::random_row(rng, vocab, vocab == 8 ? -1.5f : -0.5f, vocab == 8 ? 1.5f : 0.5f);
  check_matches(row, params(temperature, 0, 1, 0, uint64_t(vocab) * 31 + 7));
}

BOOST_DATA_TEST_CASE(empirical_frequencies_match_the_filtered_renormalised_distribution,
                     bdata::make({3, 0, 0, 5, 4}) ^ bdata::make({1.0f, 0.8f, 1.0f, 0.9f, 0.93f}) ^
                         bdata::make({0.0f, 0.0f, 0.3f, 0.25f, 0.0f}) ^
                         bdata::make({1.0f, 0.7f, 1.3f, 1.0f, 0.6f}),
                     top_k, top_p, min_p, temperature) {
  const std::vector<float> row = {0.3f, 1.2f, -0.4f, 0.9f, 0.0f, 1.5f, -1.0f, 0.6f, 0.2f, 1.1f};
  check_matches(row, params(temperature, top_k, top_p, min_p));
}

BOOST_DATA_TEST_CASE(top_k_of_one_is_greedy, bdata::xrange(1, 41) * bdata::make({0.3f, 1.0f, 5.0f}),
                     seed, temperature) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(-6, 6);  // coarse levels: ties for the best are common
  std::vector<float> row(std::size_t(2 + seed * 11));
  for (float& x : row) x = float(level(rng));
  const auto greedy = sample(row, params(0, 0, 1, 0), 0, 0).token;
  for (uint64_t pos = 0; pos < 20; ++pos)
    BOOST_TEST_REQUIRE(sample(row, params(temperature, 1, 1, 0, seed), seed, pos).token == greedy);
}

BOOST_AUTO_TEST_CASE(top_k_at_or_above_the_vocabulary_changes_no_draw) {
  std::mt19937 rng(5);
  const auto row = reference::random_row(rng, 200, -2, 2);
  for (uint64_t pos = 0; pos < 500; ++pos) {
    const auto plain = sample(row, params(1, 0, 1, 0), 0, pos).token;
    BOOST_TEST_REQUIRE(sample(row, params(1, 200, 1, 0), 0, pos).token == plain);
    BOOST_TEST_REQUIRE(sample(row, params(1, 1000, 1, 0), 0, pos).token == plain);
    BOOST_TEST_REQUIRE(sample(row, params(1, -1, 1, 0), 0, pos).token == plain);
  }
}

namespace {
struct SupportCase {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  std::set<int> expected;
};
std::ostream& operator<<(std::ostream& os, const SupportCase& c) {
  return os << "T=" << c.temperature << " k=" << c.top_k << " p=" << c.top_p
            << " min_p=" << c.min_p;
}
}  // namespace

// Ties at the top-k boundary are kept by lowest id: row {1, 3, 2, 3, 3, 0, 2}.
BOOST_DATA_TEST_CASE(top_k_keeps_exactly_the_k_best_with_ties_kept_by_lowest_id,
                     bdata::make(std::vector<SupportCase>{{1, 2, 1, 0, {1, 3}},
                                                          {1, 3, 1, 0, {1, 3, 4}},
                                                          {1, 4, 1, 0, {1, 3, 4, 2}},
                                                          {2, 5, 1, 0, {1, 3, 4, 2, 6}},
                                                          {1, 7, 1, 0, {0, 1, 2, 3, 4, 5, 6}}}),
                     c) {
  const std::vector<float> row = {1, 3, 2, 3, 3, 0, 2};
  const auto counts = histogram(row, params(c.temperature, c.top_k, c.top_p, c.min_p), 4000);
  BOOST_TEST(drawn(counts) == c.expected);
  BOOST_TEST(reference::support(reference::filtered(row, params(c.temperature, c.top_k, 1, 0))) ==
             c.expected);
}

BOOST_DATA_TEST_CASE(top_p_keeps_the_smallest_prefix_reaching_p,
                     bdata::make(std::vector<SupportCase>{{1, 0, 0.3f, 0, {1}},
                                                          {1, 0, 0.5f, 0, {1, 3}},
                                                          {1, 0, 0.72f, 0, {1, 3, 4}},
                                                          {1, 0, 0.9f, 0, {1, 3, 4, 2}},
                                                          {1, 0, 0.97f, 0, {0, 1, 2, 3, 4}},
                                                          // top-k first, renormalised: 4/7 >= .55
                                                          {1, 2, 0.55f, 0, {1}},
                                                          {1, 0, 0.55f, 0, {1, 3}}}),
                     c) {
  const auto counts = histogram(crafted_row(), params(c.temperature, c.top_k, c.top_p, 0), 4000);
  BOOST_TEST(drawn(counts) == c.expected);
}

BOOST_DATA_TEST_CASE(min_p_drops_tokens_below_that_fraction_of_the_best,
                     bdata::make(std::vector<SupportCase>{{1, 0, 1, 0.9f, {1}},
                                                          {1, 0, 1, 0.5f, {1, 3}},
                                                          {1, 0, 1, 0.3f, {1, 3, 4}},
                                                          {1, 0, 1, 0.1f, {0, 1, 2, 3, 4}},
                                                          // T = 2: ratios .35 1 .5 .87 .61
                                                          {2, 0, 1, 0.55f, {1, 3, 4}},
                                                          {2, 0, 1, 0.4f, {1, 2, 3, 4}},
                                                          // after top-p kept {1, 3, 4}
                                                          {2, 0, 0.7f, 0.4f, {1, 3, 4}}}),
                     c) {
  const auto counts =
      histogram(crafted_row(), params(c.temperature, c.top_k, c.top_p, c.min_p), 4000);
  BOOST_TEST(drawn(counts) == c.expected);
}

// Random rows and parameters against the reference: a draw never leaves the kept set, and a
// kept set of a few tokens is covered completely. Cases within 1e-4 of a top-p or min-p boundary
// are skipped (they are decided by rounding). Vocabularies up to SmolLM2's 49152.
BOOST_DATA_TEST_CASE(random_rows_and_parameters_only_draw_from_the_reference_kept_set,
                     bdata::xrange(1, 61), seed) {
  std::mt19937 rng(seed);
  const int vocab = seed % 10 == 0 ? 49152 : std::uniform_int_distribution<int>(2, 400)(rng);
  const float scale = std::uniform_real_distribution<float>(0.5f, 8)(rng);
  std::normal_distribution<float> normal(0, scale);
  std::vector<float> row(static_cast<std::size_t>(vocab));
  for (float& x : row) x = normal(rng);
  std::uniform_real_distribution<float> unit(0, 1);
  SamplerParams p;
  p.seed = seed;
  p.temperature = 0.1f + 2.9f * unit(rng);
  p.top_k = unit(rng) < 0.5f ? 0 : std::uniform_int_distribution<int>(1, vocab + 3)(rng);
  p.top_p = unit(rng) < 0.3f ? 1.0f : 0.05f + 0.95f * unit(rng);
  p.min_p = unit(rng) < 0.3f ? 0.0f : 0.8f * unit(rng);

  bool near_boundary = false;
  const auto support = reference::support(reference::filtered(row, p, 1e-4L, &near_boundary));
  if (near_boundary) return;
  BOOST_TEST_REQUIRE(!support.empty());
  std::set<int> seen;
  for (uint64_t pos = 0; pos < 400; ++pos) {
    const int token = sample(row, p, seed, pos).token;
    BOOST_TEST_REQUIRE(support.count(token) == 1u, "token " << token << " is not kept");
    seen.insert(token);
  }
  if (support.size() <= 3) {
    const auto prob = reference::filtered(row, p);
    const bool all_likely =
        std::all_of(support.begin(), support.end(), [&](int id) { return prob[id] > 0.05L; });
    if (all_likely) BOOST_TEST(seen == support);
  }
}
