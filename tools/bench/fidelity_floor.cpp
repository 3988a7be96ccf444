#include "tools/bench/fidelity_floor.hpp"

#include <algorithm>
#include <cmath>

namespace actorlm::bench {

double twin_pair_sum_floor(double m1, double m2) { return 1 - std::min(m1, m2) / std::max(m1, m2); }

double twin_pair_max_floor(double m1, double m2) { return std::abs(m2 - m1) / (m1 + m2); }

TwinFloor twin_floor(const std::vector<FidelityResult>& cases, double FidelityMetrics::*figure) {
  TwinFloor f;
  if (cases.empty()) return f;
  std::vector<bool> paired(cases.size(), false);
  double sum = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (paired[i]) continue;
    const FidelityResult& a = cases[i];
    for (std::size_t j = i + 1; j < cases.size(); ++j) {
      const FidelityResult& b = cases[j];
      if (paired[j] || a.c.workload != b.c.workload || a.c.clients != b.c.clients || a.c.regime == b.c.regime) continue;
      const double sa = a.simulated.*figure, sb = b.simulated.*figure;
      const double ma = a.measured.*figure, mb = b.measured.*figure;
      if (!(ma > 0 && mb > 0 && sa > 0) || std::abs(sa - sb) > 1e-9 * std::abs(sa)) continue;
      paired[i] = paired[j] = true;
      ++f.pairs;
      sum += twin_pair_sum_floor(ma, mb);
      f.max = std::max(f.max, twin_pair_max_floor(ma, mb));
      break;
    }
  }
  f.mean = sum / static_cast<double>(cases.size());
  return f;
}

}  // namespace actorlm::bench
