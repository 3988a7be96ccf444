#pragma once
// The floor under bench fidelity's errors that the measurement itself sets. A case's continuous
// and paged twins (the same workload and load) run the same steps wherever the regimes schedule
// alike, and the simulator then predicts the same figure for both; but the machine measures them
// apart (on a shared 2-core host, 5-10 % now and then, minutes apart). No prediction the twins
// share comes closer to both than the two measurements allow, so no calibration of the cost
// model could bring that run's errors below this floor. It is a lower bound only: a slowdown
// that falls on both twins alike does not show in it.
//
// For twins measured m1 <= m2 and any shared prediction s (errors s / m - 1):
//   |s/m1 - 1| + |s/m2 - 1| >= 1 - m1/m2                   (equality at s = m1)
//   max(|s/m1 - 1|, |s/m2 - 1|) >= (m2 - m1) / (m1 + m2)   (equality at s = 2 m1 m2 / (m1 + m2))
// The run's mean |error| over its N cases is then at least the sum of the first over the pairs
// divided by N, and its max |error| at least the largest of the second.

#include "tools/bench/fidelity.hpp"

#include <cstddef>
#include <vector>

namespace actorlm::bench {

struct TwinFloor {
  std::size_t pairs = 0;  // twin pairs found (both measured, simulated alike)
  double mean = 0;        // lower bound of the run's mean |error| of the figure
  double max = 0;         // lower bound of its max |error|
};

// Twins: two cases of the same workload and clients in different regimes whose simulated figure
// is the same (relative difference under 1e-9) and whose measured figures are both positive.
// Each case is paired at most once, with the first twin found after it.
TwinFloor twin_floor(const std::vector<FidelityResult>& cases, double FidelityMetrics::*figure);

// The two bounds above for one pair of measurements (both > 0), in that order.
double twin_pair_sum_floor(double m1, double m2);
double twin_pair_max_floor(double m1, double m2);

}  // namespace actorlm::bench
