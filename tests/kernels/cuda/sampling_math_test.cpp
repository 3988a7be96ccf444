// The GPU greedy sampler's math (kernels/cuda/sampling_math.hpp) on the host, in every build,
// against the cpu sampler (kernels/cpu/sampling.hpp, greedy): rows of random logits with NaN,
// +inf, -inf and ties, cut into random parts whose partials are merged in random orders (as the
// kernel's threads and its block reduction do), give the cpu sampler's token, its log-probability
// within 2e-6 + 2e-7 |lp|, and its top log-probabilities in the same order.
#define BOOST_TEST_MODULE sampling_math
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/sampling.hpp"
#include "kernels/cuda/sampling_math.hpp"
#include "tests/support/logit_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace m = actorlm::kernels::cuda_math;
namespace cpu = actorlm::kernels::cpu;

namespace {

// The row reduced as the kernel does: parts (a thread's strided share here is a random cut),
// each part's partial, merged in a random order.
template <class Part, class Add, class Merge>
Part reduce(const std::vector<float>& row, std::mt19937_64& rng, Part empty, Add add, Merge merge) {
  std::vector<Part> parts;
  std::size_t i = 0;
  while (i < row.size()) {
    const std::size_t n = 1 + rng() % 300;
    Part p = empty;
    for (std::size_t j = i; j < std::min(row.size(), i + n); ++j)
      add(p, m::clean_logit(row[j]), static_cast<std::int32_t>(j));
    parts.push_back(p);
    i += n;
  }
  while (parts.size() > 1) {
    const std::size_t a = rng() % parts.size();
    std::size_t b = rng() % (parts.size() - 1);
    if (b >= a) ++b;
    parts[std::min(a, b)] = merge(parts[a], parts[b]);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(std::max(a, b)));
  }
  return parts.front();
}

}  // namespace

BOOST_AUTO_TEST_CASE(greedy_tokens_log_probabilities_and_top_lists_match_the_cpu_sampler) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t vocab = 1 + rng() % 5000;
    const auto row = actorlm::testing::random_logit_row(rng, vocab);
    const std::uint32_t top_n = static_cast<std::uint32_t>(rng() % 8);
    cpu::SamplerParams p;
    p.temperature = 0;
    p.top_logprobs = top_n;
    const bool all_masked = std::all_of(row.begin(), row.end(), [](float x) { return std::isnan(x) || x == -INFINITY; });
    const auto stats = reduce(row, rng, m::softmax_empty(), m::softmax_add, m::softmax_merge);
    if (all_masked) {
      BOOST_TEST(stats.argmax < 0);
      continue;
    }
    const auto want = cpu::sample(row, p, 0, 0);
    BOOST_TEST_CONTEXT("trial " << trial << ", vocab " << vocab) {
      BOOST_TEST(stats.argmax == want.token);
      const double lp = m::log_prob(stats, stats.max);
      BOOST_TEST(std::abs(lp - double(want.logprob)) <= 2e-6 + 2e-7 * std::abs(double(want.logprob)));
      float after_value = INFINITY;
      std::int32_t after_id = -1;
      BOOST_REQUIRE_EQUAL(want.top.size(), std::min<std::size_t>(top_n, vocab));
      for (std::size_t k = 0; k < want.top.size(); ++k) {
        const auto best = reduce(
            row, rng, m::best_none(),
            [&](m::Best& b, float x, std::int32_t i) { m::best_add(b, x, i, after_value, after_id); }, m::best_merge);
        BOOST_REQUIRE(best.id >= 0);
        BOOST_TEST(best.id == want.top[k].token);
        const double tlp = m::log_prob(stats, best.value);
        if (std::isinf(want.top[k].logprob)) BOOST_TEST(std::isinf(tlp));
        else BOOST_TEST(std::abs(tlp - double(want.top[k].logprob)) <= 2e-6 + 2e-7 * std::abs(double(want.top[k].logprob)));
        after_value = best.value;
        after_id = best.id;
      }
    }
  }
}
