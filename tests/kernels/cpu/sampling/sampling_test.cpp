// The sampler's deterministic contract: greedy, reproducible draws, reported log-probabilities,
// masked and non-finite logits, and rejected inputs.
#define BOOST_TEST_MODULE sampling_cpu
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/sampling.hpp"
#include "tests/kernels/cpu/sampling/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

using namespace actorlm::kernels::cpu;
namespace bdata = boost::unit_test::data;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

SamplerParams with_temperature(float t, uint64_t seed = 0) {
  SamplerParams p;
  p.temperature = t;
  p.seed = seed;
  return p;
}
}  // namespace

BOOST_DATA_TEST_CASE(greedy_returns_the_first_maximum_of_random_rows,
                     bdata::xrange(1, 31) * bdata::make({0.0f, 1e-6f, 9.9e-6f}), seed,
                     temperature) {
  std::mt19937 rng(seed);
  // Few distinct values, so that ties for the maximum are common.
  std::uniform_int_distribution<int> level(-4, 4);
  std::vector<float> row(static_cast<std::size_t>(50 + seed * 37));
  for (float& x : row) x = float(level(rng)) * 0.5f;
  const auto expected = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
  const Sampled s = sample(row, with_temperature(temperature, seed), seed, seed * 3);
  BOOST_TEST(s.token == expected);
}

BOOST_AUTO_TEST_CASE(greedy_breaks_ties_toward_the_lowest_id_whatever_the_filters) {
  std::vector<float> row(20, 0.0f);
  row[12] = row[3] = row[7] = 2.5f;
  SamplerParams p;
  p.temperature = 0;
  p.top_k = 5;
  p.top_p = 0.1f;
  p.min_p = 0.9f;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    BOOST_TEST(sample(row, p, seed, seed).token == 3);
  }
}

BOOST_AUTO_TEST_CASE(a_draw_depends_only_on_seed_stream_and_position) {
  std::mt19937 rng(7);
  const auto row = reference::random_row(rng, 500, -2, 2);
  const SamplerParams p = with_temperature(1.0f, 1234);
  struct Key {
    uint64_t stream, position;
  };
  std::vector<Key> keys;
  for (uint64_t s = 0; s < 5; ++s)
    for (uint64_t pos = 0; pos < 40; ++pos) keys.push_back({s, pos});
  std::vector<int32_t> first;
  for (const Key& k : keys) first.push_back(sample(row, p, k.stream, k.position).token);

  // Again in a shuffled order, interleaved with unrelated draws of other rows and params.
  std::vector<std::size_t> order(keys.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  const auto other_row = reference::random_row(rng, 77, -1, 1);
  for (std::size_t i : order) {
    sample(other_row, with_temperature(0.7f, 99), keys[i].stream + 1, keys[i].position);
    BOOST_TEST(sample(row, p, keys[i].stream, keys[i].position).token == first[i]);
  }
}

BOOST_AUTO_TEST_CASE(draws_differ_across_positions_streams_and_seeds) {
  // A flat distribution over 1000 tokens: 200 independent draws repeat a token ~20 times at
  // most by chance, so fewer than 150 distinct tokens means the draws are not varying.
  const std::vector<float> row(1000, 0.0f);
  auto distinct = [&](auto key_of) {
    std::set<int32_t> seen;
    for (uint64_t i = 0; i < 200; ++i) {
      const auto [seed, stream, position] = key_of(i);
      seen.insert(sample(row, with_temperature(1, seed), stream, position).token);
    }
    return seen.size();
  };
  BOOST_TEST(distinct([](uint64_t i) { return std::tuple{5ull, 3ull, i}; }) > 150u);
  BOOST_TEST(distinct([](uint64_t i) { return std::tuple{5ull, i, 3ull}; }) > 150u);
  BOOST_TEST(distinct([](uint64_t i) { return std::tuple{i, 3ull, 3ull}; }) > 150u);
}

BOOST_AUTO_TEST_CASE(counter_uniform_stays_in_the_unit_interval_and_is_a_pure_function) {
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = counter_uniform(i * 7919, i % 13, i);
    BOOST_TEST((u >= 0.0 && u < 1.0));
    BOOST_TEST(u == counter_uniform(i * 7919, i % 13, i));
  }
}

BOOST_DATA_TEST_CASE(logprobs_equal_an_independent_long_double_log_softmax,
                     bdata::xrange(1, 21) * bdata::make({0.0f, 0.3f, 1.0f, 1.7f}), seed,
                     temperature) {
  std::mt19937 rng(seed);
  const auto row = reference::random_row(rng, 3000, -40, 40);
  const auto logp = reference::log_softmax(row);  // no temperature: reported on raw logits
  SamplerParams p = with_temperature(temperature, seed);
  p.top_k = int32_t(seed % 4 == 0 ? 0 : seed * 5);
  p.top_p = 0.95f;
  p.top_logprobs = 8;
  const Sampled s = sample(row, p, 0, seed);
  auto close = [](float got, long double want) {
    return std::fabs(got - double(want)) <= 1e-6 + 2e-7 * std::fabs(double(want));
  };
  BOOST_TEST(close(s.logprob, logp[std::size_t(s.token)]),
             "token " << s.token << ": " << s.logprob << " vs " << double(logp[s.token]));
  const auto order = reference::ranking(logp);
  BOOST_TEST_REQUIRE(s.top.size() == 8u);
  for (std::size_t i = 0; i < s.top.size(); ++i) {
    BOOST_TEST(s.top[i].token == order[i]);
    BOOST_TEST(close(s.top[i].logprob, logp[std::size_t(order[i])]));
  }
}

BOOST_AUTO_TEST_CASE(top_logprobs_are_sorted_descending_with_ties_by_id_and_capped_at_vocab) {
  const std::vector<float> row = {1, 3, 2, 3, -kInf, 0, 3};
  SamplerParams p;
  p.top_logprobs = 4;
  const Sampled s = sample(row, p, 0, 0);
  const std::vector<int32_t> want = {1, 3, 6, 2};
  BOOST_TEST_REQUIRE(s.top.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) BOOST_TEST(s.top[i].token == want[i]);
  BOOST_TEST(s.top[0].logprob == s.top[1].logprob);
  BOOST_TEST(s.top[1].logprob == s.top[2].logprob);
  BOOST_TEST(s.top[3].logprob < s.top[2].logprob);

  p.top_logprobs = 100;
  const Sampled all = sample(row, p, 0, 0);
  BOOST_TEST_REQUIRE(all.top.size() == row.size());
  BOOST_TEST(all.top.back().token == 4);
  BOOST_TEST(all.top.back().logprob == -kInf);
  for (std::size_t i = 1; i < all.top.size(); ++i)
    BOOST_TEST(all.top[i - 1].logprob >= all.top[i].logprob);

  p.top_logprobs = 0;
  BOOST_TEST(sample(row, p, 0, 0).top.empty());
}

BOOST_DATA_TEST_CASE(masked_tokens_are_never_drawn, bdata::make({0.5f, 1.0f, 4.0f}), temperature) {
  std::vector<float> row(64);
  for (std::size_t i = 0; i < row.size(); ++i) row[i] = i % 2 ? -kInf : float(i % 7) - 3.0f;
  for (uint64_t pos = 0; pos < 2000; ++pos) {
    const Sampled s = sample(row, with_temperature(temperature, 11), 2, pos);
    BOOST_TEST_REQUIRE(s.token % 2 == 0);
    BOOST_TEST_REQUIRE(std::isfinite(s.logprob));
  }
}

BOOST_AUTO_TEST_CASE(nan_logits_behave_exactly_like_minus_infinity) {
  std::mt19937 rng(3);
  auto with_nan = reference::random_row(rng, 300, -3, 3);
  auto with_inf = with_nan;
  for (std::size_t i = 0; i < with_nan.size(); i += 3) {
    with_nan[i] = kNaN;
    with_inf[i] = -kInf;
  }
  SamplerParams p = with_temperature(0.8f, 5);
  p.top_logprobs = 300;
  for (uint64_t pos = 0; pos < 500; ++pos) {
    const Sampled a = sample(with_nan, p, 1, pos);
    const Sampled b = sample(with_inf, p, 1, pos);
    BOOST_TEST_REQUIRE(a.token == b.token);
    BOOST_TEST_REQUIRE(a.token % 3 != 0);
    BOOST_TEST_REQUIRE(a.logprob == b.logprob);
    for (std::size_t i = 0; i < a.top.size(); ++i) {
      BOOST_TEST_REQUIRE(a.top[i].token == b.top[i].token);
      BOOST_TEST_REQUIRE(a.top[i].logprob == b.top[i].logprob);
    }
  }
  BOOST_TEST(sample(std::vector<float>{kNaN, 1, kNaN}, with_temperature(0), 0, 0).token == 1);
}

BOOST_AUTO_TEST_CASE(positive_infinity_takes_all_the_probability) {
  const std::vector<float> row = {5, kInf, 7, kInf, 1e30f};
  for (uint64_t pos = 0; pos < 1000; ++pos) {
    const Sampled s = sample(row, with_temperature(0.01f, 9), 0, pos);
    BOOST_TEST_REQUIRE((s.token == 1 || s.token == 3));
    BOOST_TEST_REQUIRE(std::fabs(s.logprob - std::log(0.5f)) < 1e-6f);
  }
  BOOST_TEST(sample(row, with_temperature(0), 0, 0).token == 1);
}

BOOST_AUTO_TEST_CASE(extreme_logits_and_temperatures_stay_finite) {
  const std::vector<float> row = {-3e38f, 3e38f, 0, 2.9e38f};
  for (float t : {1e-5f, 1e-3f, 1.0f, 1e4f}) {
    const Sampled s = sample(row, with_temperature(t, 1), 0, 0);
    BOOST_TEST((s.token >= 0 && s.token < 4));
    BOOST_TEST(!std::isnan(s.logprob));
  }
  // At T = 1e-5 the gap of 1e37 is decisive; at T = 1e38 it is not.
  std::set<int32_t> seen;
  for (uint64_t pos = 0; pos < 200; ++pos)
    seen.insert(sample(row, with_temperature(1e38f, 1), 0, pos).token);
  BOOST_TEST(seen.size() >= 3u);
}

namespace {
struct BadCase {
  std::vector<float> row;
  SamplerParams params;
  const char* mentions;
};
std::ostream& operator<<(std::ostream& os, const BadCase& c) { return os << c.mentions; }

SamplerParams tweak(void (*f)(SamplerParams&)) {
  SamplerParams p;
  f(p);
  return p;
}

const std::vector<BadCase> bad_cases = {
    {{}, {}, "empty"},
    {{-kInf, kNaN, -kInf}, {}, "every logit"},
    {{-kInf, kNaN}, tweak([](SamplerParams& p) { p.temperature = 0; }), "every logit"},
    {{1, 2}, tweak([](SamplerParams& p) { p.temperature = -1; }), "temperature"},
    {{1, 2}, tweak([](SamplerParams& p) { p.temperature = kNaN; }), "temperature"},
    {{1, 2}, tweak([](SamplerParams& p) { p.top_p = 0; }), "top_p"},
    {{1, 2}, tweak([](SamplerParams& p) { p.top_p = 1.5f; }), "top_p"},
    {{1, 2}, tweak([](SamplerParams& p) { p.top_p = kNaN; }), "top_p"},
    {{1, 2}, tweak([](SamplerParams& p) { p.min_p = -0.1f; }), "min_p"},
    {{1, 2}, tweak([](SamplerParams& p) { p.min_p = 2; }), "min_p"},
};
}  // namespace

BOOST_DATA_TEST_CASE(rejects_empty_or_fully_masked_rows_and_out_of_range_parameters,
                     bdata::make(bad_cases), c) {
  try {
    sample(c.row, c.params, 0, 0);
    BOOST_FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find(c.mentions) != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(penalties_subtract_presence_once_and_frequency_per_occurrence) {
  std::vector<float> logits = {1, 1, 1, 1};
  const std::vector<int32_t> generated = {2, 2, 3, 2, 7, -1};  // 7 and -1 lie outside: ignored
  apply_penalties(logits, generated, 0.5f, 0.25f);
  BOOST_TEST(logits[0] == 1.0f);
  BOOST_TEST(logits[1] == 1.0f);
  BOOST_TEST(logits[2] == 1.0f - 0.5f - 3 * 0.25f);
  BOOST_TEST(logits[3] == 1.0f - 0.5f - 0.25f);
}

BOOST_AUTO_TEST_CASE(a_strong_presence_penalty_moves_greedy_off_a_generated_token) {
  std::vector<float> logits = {0.0f, 3.0f, 2.0f};
  apply_penalties(logits, std::vector<int32_t>{1}, 2.0f, 0.0f);
  SamplerParams greedy;
  greedy.temperature = 0;
  BOOST_TEST(sample(logits, greedy, 0, 0).token == 2);
}

BOOST_AUTO_TEST_CASE(repetition_penalty_divides_positive_and_multiplies_negative_logits_once_per_token) {
  std::vector<float> logits = {2.0f, -2.0f, 2.0f, 0.0f, 4.0f};
  const std::vector<int32_t> seen = {0, 0, 1, 3, 9, -1};  // 0 twice: once; 9 and -1 outside: ignored
  apply_repetition_penalty(logits, seen, 2.0f);
  BOOST_TEST(logits[0] == 1.0f);
  BOOST_TEST(logits[1] == -4.0f);
  BOOST_TEST(logits[2] == 2.0f);  // not seen
  BOOST_TEST(logits[3] == 0.0f);
  BOOST_TEST(logits[4] == 4.0f);
  std::vector<float> same = {2.0f, -2.0f};
  apply_repetition_penalty(same, seen, 1.0f);
  BOOST_TEST((same == std::vector<float>{2.0f, -2.0f}));
}

BOOST_AUTO_TEST_CASE(a_repetition_penalty_moves_greedy_off_a_seen_token) {
  std::vector<float> logits = {0.0f, 3.0f, 2.0f};
  apply_repetition_penalty(logits, std::vector<int32_t>{1}, 1.6f);  // 3 / 1.6 < 2
  BOOST_TEST(sample(logits, with_temperature(0), 0, 0).token == 2);
}

BOOST_AUTO_TEST_CASE(logit_bias_adds_to_its_tokens_and_minus_100_bans_a_token_in_practice) {
  std::vector<float> logits = {5.0f, 4.0f, 1.0f};
  const std::vector<TokenBias> bias = {{0, -100.0f}, {2, 0.5f}, {7, 3.0f}};  // 7 lies outside: ignored
  apply_logit_bias(logits, bias);
  BOOST_TEST(logits[0] == -95.0f);
  BOOST_TEST(logits[1] == 4.0f);
  BOOST_TEST(logits[2] == 1.5f);
  for (uint64_t pos = 0; pos < 200; ++pos) BOOST_TEST(sample(logits, with_temperature(1, 7), 0, pos).token != 0);
}

BOOST_AUTO_TEST_CASE(masked_tokens_are_never_drawn_and_greedy_takes_the_next_best) {
  std::vector<float> logits = {1.0f, 9.0f, 8.0f, 0.5f};
  mask_tokens(logits, std::vector<int32_t>{1, 40, -3});
  BOOST_TEST(std::isinf(logits[1]));
  BOOST_TEST(sample(logits, with_temperature(0), 0, 0).token == 2);
  for (uint64_t pos = 0; pos < 200; ++pos) BOOST_TEST(sample(logits, with_temperature(2, 3), 0, pos).token != 1);
}

// score(): the token's log-probability as a draw reports it, and its rank: 1 + the tokens with a
// strictly higher logit, so that ties share a rank, NaN ranks last (as -inf) and +inf first.
BOOST_AUTO_TEST_CASE(score_ranks_a_token_among_the_tokens_more_likely) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -inf, nan, 2.0f};
  BOOST_TEST(score(logits, 1, 0).rank == 1u);  // tied for first
  BOOST_TEST(score(logits, 2, 0).rank == 1u);
  BOOST_TEST(score(logits, 5, 0).rank == 3u);
  BOOST_TEST(score(logits, 0, 0).rank == 4u);
  BOOST_TEST(score(logits, 3, 0).rank == 5u);  // -inf: below every finite logit
  BOOST_TEST(score(logits, 4, 0).rank == 5u);  // NaN counts as -inf
  const Scored s = score(logits, 5, 2);
  BOOST_TEST(s.token == 5);
  const double sum = 2 * std::exp(3.0) + std::exp(2.0) + std::exp(1.0);
  BOOST_TEST(std::abs(s.logprob - (2.0 - std::log(sum))) < 1e-5);
  BOOST_TEST_REQUIRE(s.top.size() == 2u);
  BOOST_TEST(s.top[0].token == 1);  // the tie goes to the lower id
  BOOST_TEST(s.top[1].token == 2);
  const std::vector<float> huge = {0.0f, inf, 5.0f};
  BOOST_TEST(score(huge, 1, 0).rank == 1u);
  BOOST_TEST(score(huge, 2, 0).rank == 2u);
}
