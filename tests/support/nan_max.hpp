#pragma once
// The larger of two errors where NaN wins: std::max(worst, NaN) keeps `worst`, which would let a
// NaN result pass a tolerance check.
#include <cmath>
#include <limits>

namespace actorlm::testing {
inline double nan_max(double worst, double x) {
  return (std::isnan(worst) || std::isnan(x)) ? std::numeric_limits<double>::quiet_NaN() : (x > worst ? x : worst);
}
}  // namespace actorlm::testing
