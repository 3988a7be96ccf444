#pragma once
// Timing helpers for benchmarks: median of repeated wall-clock samples.

#include <algorithm>
#include <chrono>
#include <vector>

namespace actorlm::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
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
