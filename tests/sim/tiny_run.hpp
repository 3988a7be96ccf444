#pragma once
// The hand-computed run shared by the metrics and report suites.
// A: arrives at 0, scheduled at 0.5 s, tokens at 1, 1.5, 2, 2.5, 3 s.
// B: arrives at 1 s, scheduled at once, its one token at 2 s.  C: refused.

#include "sim/metrics.hpp"

#include <vector>

namespace actorlm::sim::testing {

constexpr std::int64_t s = 1'000'000'000;  // ns

inline std::vector<RequestTiming> tiny_run() {
  RequestTiming a{1, 0, 1 * s, 3 * s, 10, 5, {s, 3 * s / 2, 2 * s, 5 * s / 2, 3 * s}, true, s / 2};
  RequestTiming b{2, 1 * s, 2 * s, 2 * s, 20, 1, {2 * s}, true, 1 * s};
  RequestTiming c{3, 2 * s, -1, -1, 30, 0, {}, false, -1};
  return {a, b, c};
}

inline std::vector<scheduler::StepRecord> tiny_steps() {
  return {{1, 0, 1 * s, 2, 30, 0, 2, 8, 0}, {2, 1 * s, 4 * s, 4, 0, 4, 4, 8, 1}};
}

}  // namespace actorlm::sim::testing
