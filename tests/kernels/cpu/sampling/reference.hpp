#pragma once
// An independent reference for the sampler's semantics, in long double with a full sort: what
// each filter keeps and the resulting distribution. Written from the header's contract, not from
// sampling.cpp, so the two can disagree.

#include "kernels/cpu/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace reference {

using actorlm::kernels::cpu::SamplerParams;

inline long double cleaned(float x) {
  if (std::isnan(x)) return -std::numeric_limits<long double>::infinity();
  return std::min<long double>(x, std::numeric_limits<float>::max());
}

// log-softmax of the cleaned row, divided by `temperature` first. [vocab]
inline std::vector<long double> log_softmax(const std::vector<float>& logits,
                                            long double temperature = 1) {
  long double m = -std::numeric_limits<long double>::infinity();
  for (float x : logits) m = std::max(m, cleaned(x));
  long double z = 0;
  for (float x : logits) z += std::exp((cleaned(x) - m) / temperature);
  std::vector<long double> out;
  for (float x : logits) out.push_back((cleaned(x) - m) / temperature - std::log(z));
  return out;
}

// Token ids by (probability desc, id asc) under the tempered distribution.
inline std::vector<int> ranking(const std::vector<long double>& logp) {
  std::vector<int> ids(logp.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return logp[a] > logp[b]; });
  return ids;
}

// The distribution the draw uses after top-k, top-p and min-p; 0 for dropped tokens. [vocab]
// `margin` > 0 reports through `near_boundary` whether a top-p or min-p decision was closer than
// that to flipping, so that property tests can skip cases decided by rounding.
inline std::vector<long double> filtered(const std::vector<float>& logits, const SamplerParams& p,
                                         long double margin = 0, bool* near_boundary = nullptr) {
  const auto logp = log_softmax(logits, p.temperature);
  const auto order = ranking(logp);
  std::vector<int> kept;
  for (int id : order)
    if (std::isfinite(logp[id])) kept.push_back(id);
  if (p.top_k > 0 && std::size_t(p.top_k) < kept.size()) kept.resize(std::size_t(p.top_k));

  auto mass_of = [&](std::size_t n) {
    long double z = 0;
    for (std::size_t i = 0; i < n; ++i) z += std::exp(logp[kept[i]]);
    return z;
  };
  bool near = false;
  if (p.top_p < 1) {
    const long double z = mass_of(kept.size());
    long double cumulative = 0;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      cumulative += std::exp(logp[kept[i]]) / z;
      if (std::fabs(cumulative - p.top_p) < margin) near = true;
      if (cumulative >= p.top_p) {
        kept.resize(i + 1);
        break;
      }
    }
  }
  if (p.min_p > 0) {
    const long double best = std::exp(logp[kept.front()]);
    std::vector<int> survivors;
    for (int id : kept) {
      const long double ratio = std::exp(logp[id]) / best;
      if (std::fabs(ratio - p.min_p) < margin) near = true;
      if (ratio >= p.min_p) survivors.push_back(id);
    }
    kept = survivors;
  }
  if (near_boundary) *near_boundary = near;

  std::vector<long double> prob(logits.size(), 0);
  const long double z = mass_of(kept.size());
  for (int id : kept) prob[id] = std::exp(logp[id]) / z;
  return prob;
}

inline std::set<int> support(const std::vector<long double>& prob) {
  std::set<int> s;
  for (std::size_t i = 0; i < prob.size(); ++i)
    if (prob[i] > 0) s.insert(int(i));
  return s;
}

// Pearson's statistic of observed counts against expected probabilities (zero-probability
// categories must have zero counts; they are skipped).
inline double chi_square(const std::vector<int>& counts, const std::vector<long double>& prob,
                         int draws) {
  double stat = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (prob[i] == 0) continue;
    const double expected = double(prob[i]) * draws;
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return stat;
}

// Upper 0.1% point of chi-square with `dof` degrees of freedom (Wilson-Hilferty; within ~1% for
// dof >= 3, which is ample for a 0.1% test).
inline double chi_square_critical_999(int dof) {
  const double z = 3.0902;  // standard normal 99.9% quantile
  const double a = 2.0 / (9.0 * dof);
  return dof * std::pow(1 - a + z * std::sqrt(a), 3);
}

inline std::vector<float> random_row(std::mt19937& rng, int vocab, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> row(static_cast<std::size_t>(vocab));
  for (float& x : row) x = d(rng);
  return row;
}

}  // namespace reference
