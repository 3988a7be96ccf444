#pragma once
// n floats drawn from N(0, stddev^2), reproducible from the seed: test inputs for kernels.
#include <cstddef>
#include <random>
#include <vector>

namespace actorlm::testing {
inline std::vector<float> normal_floats(std::size_t n, unsigned seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
}  // namespace actorlm::testing
