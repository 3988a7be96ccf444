#pragma once
// Timing helpers for benchmarks: median of repeated wall-clock samples, percentiles.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace actorlm::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// The nearest-rank p-th percentile (p in (0, 100]) of v, which it sorts; 0 when v is empty.
inline double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * double(v.size())));
  return v[std::max<std::size_t>(rank, 1) - 1];
}

// Microseconds taken by f().
template <class F>
double time_us(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

}  // namespace actorlm::bench
