#pragma once
// Rows of logits for the sampler tests: normal values, and in one row of five each of the cases
// the samplers must agree on: ties at the top, NaN and -inf sprinkled, a +inf, a row mostly -inf.
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace actorlm::testing {

inline std::vector<float> random_logit_row(std::mt19937_64& rng, std::size_t vocab) {
  std::normal_distribution<float> normal(0, 4);
  std::vector<float> row(vocab);
  for (float& x : row) x = normal(rng);
  const auto at = [&] { return std::size_t(rng() % vocab); };
  switch (rng() % 5) {
    case 0: break;
    case 1:  // ties at the top
      for (int i = 0; i < 3; ++i) row[at()] = 30.0f;
      break;
    case 2:  // NaN and -inf sprinkled
      for (int i = 0; i < 20; ++i) row[at()] = std::numeric_limits<float>::quiet_NaN();
      for (int i = 0; i < 20; ++i) row[at()] = -std::numeric_limits<float>::infinity();
      break;
    case 3:  // +inf takes all the mass (as the largest float)
      row[at()] = std::numeric_limits<float>::infinity();
      break;
    case 4:  // most of the row -inf
      for (std::size_t i = 0; i < vocab; ++i)
        if (rng() % 10 != 0) row[i] = -std::numeric_limits<float>::infinity();
      break;
  }
  return row;
}

// A GPU sampler's log-probability against the cpu sampler's: within 1e-5 + 1e-6 |want|, and
// infinities equal.
inline bool logprob_close(double got, double want) {
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::abs(got - want) <= 1e-5 + 1e-6 * std::abs(want);
}

}  // namespace actorlm::testing
