// The cost model fitted to calibrate's measured step times (calibrate.hpp, "Fitting"): the
// feature columns read off sim::CostModel, the non-negative least squares, the Gauss-Newton
// refinement above overlap 0, and the search over the large-batch threshold and the overlap.
// Plain C++ on the simulator's model: no shards, no actors.
#include "tools/bench/calibrate.hpp"

#include "kernels/cpu/model/matmul.hpp"
#include "sim/model/cost_model.hpp"
#include "tools/bench/timing.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace actorlm::bench {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// The fitted parameters, in the order of the feature columns.
// (link last: it is left out at TP 1.)
enum Param : std::size_t {
  small_gemm, large_gemm, dequant, attention, prefill_attention, launch, large_batch, link, param_count
};
constexpr const char* param_names[param_count] = {
    "small_gemm_tflops", "fp16_tflops",      "gemm_dequant_gweights_per_s", "attention_tflops",
    "prefill_attention_tflops", "kernel_launch_us", "large_batch_gemm_tflops", "link_bandwidth_gbps"};

// What the fit holds fixed while it solves for the rates: the GEMM regimes' row thresholds (below
// small_rows the few-row kernels, a property of the kernels, kernels/cpu/model/matmul.hpp; from
// large_rows on (0: none) the large-batch rate, the threshold the fit finds best among
// large_batch_candidates) and the share of the shorter of a kernel's memory and arithmetic times
// that overlaps the longer (Hardware::memory_overlap: with fit_overlap the best of the
// overlap_steps + 1 tried, otherwise 0).
struct ModelForm {
  std::uint32_t small_rows = 0, large_rows = 0;
  double overlap = 0;
};

// The overlaps the fit tries when asked to fit one (fit_overlap; otherwise 0 alone): 0 (memory
// time adds to arithmetic), 0.05, ..., 1 (the roofline).
// Measured on 2 EPYC vCPUs (run 56's calibration, 2026-12-07): with the sum, decode steps of 2
// and 4 sequences came out 25-27 % slower than measured and those of 24-95 sequences 3-8 %
// faster, one rate per row fitting neither: a decode step of 1 row cost 3.36 ms, little more than
// the weights' read (2.7 ms), each further row up to 4 added 0.25-0.7 ms and from 8 rows on about
// 1.0 ms, as when part of the read hides under the arithmetic. Refitted with the overlap (0.70):
// rms 6.5 -> 2.2 %.
constexpr int overlap_steps = 20;
// Measured on a 2-vCPU Zen 4 (calibrate, prompts prefilled together): steps of 512 tokens on the
// fp16 rate, of 1024 and 2048 tokens 6-9 % slower than it predicts. So the large-batch rate
// starts above 512 rows, at a threshold the measurements choose.
constexpr std::uint32_t min_large_batch_rows = 513;

// The large-batch thresholds the fit tries: none, and each distinct step size (tokens: the rows
// of the layers' GEMMs) from min_large_batch_rows on of the shapes that prefill several prompts
// together, the steps the rate was found on (a mixed step of one prompt beside decodes is priced
// by the threshold chosen, but does not offer its own size: alone at its size, it would let the
// rate absorb that one shape's residual). Each candidate puts another set of those shapes on the
// large-batch rate; the fit keeps the one the evidence supports best, none on a tie. (A fixed
// list tied wherever the grid had no shape between two of its entries, and the first won.) A
// threshold between two step sizes of the grid is found as the larger: steps of sizes between
// them are then priced at the plain rate.
std::vector<std::uint32_t> large_batch_candidates(const std::vector<CalibrationPoint>& points) {
  std::vector<std::uint32_t> out{0};
  for (const auto& p : points) {
    const std::uint32_t rows = p.shape.chunk * p.shape.prompts + p.shape.batch;
    if (p.shape.prompts > 1 && p.shape.batch == 0 && rows >= min_large_batch_rows) out.push_back(rows);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Every rate free and every fixed cost zero: the cost model then charges nothing.
sim::Hardware free_hardware(ModelForm form) {
  sim::Hardware h;
  h.memory_bytes = 1e18;
  h.bandwidth = h.flops = h.link_bandwidth = h.host_bandwidth = inf;
  h.small_gemm_rows = form.small_rows;
  h.large_batch_rows = form.large_rows;
  h.small_gemm_flops = h.gemm_weight_rate = h.attention_flops = h.prefill_attention_flops = h.large_batch_flops = inf;
  // With the memory traffic free (infinite bandwidth) the overlap changes nothing: a kernel costs
  // its arithmetic, so the features below are linear in the rates' inverses whatever it is.
  h.memory_overlap = form.overlap;
  return h;
}

// The hardware whose cost model is theta . phi: rates are 1 / theta (free when theta is 0).
sim::Hardware hardware_of(const std::array<double, param_count>& theta, ModelForm form) {
  sim::Hardware h = free_hardware(form);
  const auto rate = [](double t) { return t > 0 ? 1 / t : inf; };
  h.small_gemm_flops = rate(theta[small_gemm]);
  h.flops = rate(theta[large_gemm]);
  h.gemm_weight_rate = theta[dequant] > 0 ? 1 / theta[dequant] : 0;
  h.attention_flops = rate(theta[attention]);
  h.prefill_attention_flops = rate(theta[prefill_attention]);
  h.kernel_launch = theta[launch];
  h.large_batch_flops = rate(theta[large_batch]);
  h.link_bandwidth = rate(theta[link]);
  return h;
}

// phi_k(shape): the cost model's seconds with parameter k at 1 (unit rate) and the rest free.
std::array<double, param_count> features(const sim::ModelPreset& m, std::uint32_t tp, std::uint32_t block_size,
                                         ModelForm form, const sim::StepShape& shape) {
  std::array<double, param_count> phi{};
  const sim::Parallelism par{sim::ParallelKind::tensor, tp};
  for (std::size_t k = 0; k < param_count; ++k) {
    std::array<double, param_count> theta{};
    theta[k] = 1;
    const sim::Hardware h = hardware_of(theta, form);
    phi[k] = sim::CostModel(m, h, par, block_size).step_seconds(shape);
  }
  return phi;
}

// Non-negative least squares on relative errors: `a`'s rows are the features over the measured
// time, `b` 1 less the fixed part over it. Columns scaled to unit maximum (their rates span 15
// orders of magnitude), unscaled after, so that the solver's normal equations stay well
// conditioned.
std::array<double, param_count> solve_relative(std::vector<std::vector<double>> a, const std::vector<double>& b,
                                               std::size_t used) {
  std::vector<double> scale(used, 0);
  for (const auto& row : a)
    for (std::size_t k = 0; k < used; ++k) scale[k] = std::max(scale[k], std::abs(row[k]));
  for (auto& row : a)
    for (std::size_t k = 0; k < used; ++k) row[k] = scale[k] > 0 ? row[k] / scale[k] : 0;
  const std::vector<double> x = non_negative_least_squares(a, b);
  std::array<double, param_count> theta{};
  for (std::size_t k = 0; k < used; ++k) theta[k] = scale[k] > 0 ? x[k] / scale[k] : 0;
  return theta;
}

// The fit at a given form.
// With the memory traffic adding to the arithmetic (overlap 0) the step time is linear in the
// rates' inverses theta once the memory time, known from the measured bandwidth, is set aside:
// one least-squares solve. With a partial overlap a kernel costs the longer of the two plus a
// share of the shorter, linear in theta only piecewise (which side is longer); the fit then
// solves again and again on the model's slopes at the current theta (Gauss-Newton: each slope
// read off the cost model itself by a small step of one theta) until theta stops moving, from
// the linear solution and from `start` (the fit at the next smaller overlap: near the roofline a
// kernel's shorter side has almost no slope, and a start on the wrong side of it stays there),
// keeping the best solution seen. `theta_out`: the rates' inverses found.
CalibrationFit fit_at(const sim::ModelPreset& m, std::uint32_t tp, std::uint32_t block_size, std::uint32_t repeats,
                      std::vector<CalibrationPoint> points, double read_bytes_per_s, ModelForm form,
                      const std::array<double, param_count>* start, std::array<double, param_count>& theta_out) {
  const std::size_t used = tp > 1 ? param_count : param_count - 1;  // no link term at TP 1
  const sim::Parallelism par{sim::ParallelKind::tensor, tp};
  // The model's step time at theta, memory traffic included: what the simulator computes.
  const auto predict = [&](const std::array<double, param_count>& th, const sim::StepShape& shape) {
    sim::Hardware h = hardware_of(th, form);
    h.bandwidth = h.host_bandwidth = read_bytes_per_s / tp;
    return sim::CostModel(m, h, par, block_size).step_seconds(shape);
  };
  std::vector<sim::StepShape> shapes;
  std::vector<std::array<double, param_count>> unit;  // each point's features at unit rates
  for (const auto& p : points) {
    shapes.push_back(calibration_step_shape(p.shape, repeats));
    unit.push_back(features(m, tp, block_size, form, shapes.back()));
  }
  // The part of each step the fit does not choose: its memory traffic at the measured bandwidth.
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  for (std::size_t i = 0; i < points.size(); ++i) {
    std::vector<double> row(used);
    for (std::size_t k = 0; k < used; ++k) row[k] = unit[i][k] / points[i].measured_s;  // relative error
    a.push_back(std::move(row));
    b.push_back(1.0 - predict({}, shapes[i]) / points[i].measured_s);
  }
  std::array<double, param_count> theta = solve_relative(a, b, used);
  if (form.overlap > 0) {
    const auto squares_at = [&](const std::array<double, param_count>& th) {
      double sq = 0;
      for (std::size_t i = 0; i < points.size(); ++i) sq += std::pow(predict(th, shapes[i]) / points[i].measured_s - 1, 2);
      return sq;
    };
    // Each theta's step for the slopes: one that moves the most sensitive step by 1e-7 of its time.
    std::array<double, param_count> step{};
    for (std::size_t k = 0; k < used; ++k)
      for (std::size_t i = 0; i < points.size(); ++i)
        if (unit[i][k] > 0) step[k] = step[k] > 0 ? std::min(step[k], 1e-7 * points[i].measured_s / unit[i][k])
                                                  : 1e-7 * points[i].measured_s / unit[i][k];
    std::array<double, param_count> best = theta;
    double best_sq = squares_at(theta);
    // Gauss-Newton from `th` until it stops moving (30 steps at most).
    const auto refine = [&](std::array<double, param_count> th) {
      for (int iteration = 0; iteration < 30; ++iteration) {
        for (std::size_t i = 0; i < points.size(); ++i) {
          const double t0 = predict(th, shapes[i]);
          double fixed = t0;
          for (std::size_t k = 0; k < used; ++k) {
            double slope = 0;
            if (step[k] > 0) {
              std::array<double, param_count> moved = th;
              moved[k] += step[k];
              slope = (predict(moved, shapes[i]) - t0) / step[k];
            }
            fixed -= slope * th[k];
            a[i][k] = slope / points[i].measured_s;
          }
          b[i] = 1.0 - fixed / points[i].measured_s;
        }
        const std::array<double, param_count> next = solve_relative(a, b, used);
        const double sq = squares_at(next);
        if (sq < best_sq) {
          best = next;
          best_sq = sq;
        }
        bool moved = false;
        for (std::size_t k = 0; k < used; ++k) moved = moved || std::abs(next[k] - th[k]) > 1e-9 * std::max(next[k], th[k]);
        if (!moved) break;
        th = next;
      }
    };
    refine(theta);
    if (start != nullptr) refine(*start);
    theta = best;
  }
  theta_out = theta;
  if (theta[large_gemm] <= 0 && theta[small_gemm] <= 0)
    throw std::runtime_error("calibrate: the fit found every GEMM free: the measured times are not what the cost "
                             "model describes (a machine far too loaded?)");

  CalibrationFit f;
  f.tp = tp;
  f.hardware = hardware_of(theta, form);
  sim::Hardware& h = f.hardware;
  // A rate the fit finds free (noise on a grid where its term is small) is left out of the entry,
  // so the cost model falls back to its default for that term.
  if (theta[large_gemm] <= 0) {  // all GEMMs at the few-row rate
    h.flops = h.small_gemm_flops;
    h.small_gemm_rows = 0;
    h.small_gemm_flops = 0;
    f.dropped.push_back(std::string(param_names[large_gemm]) + " (GEMMs of any size then run at small_gemm_tflops)");
  } else if (theta[small_gemm] <= 0) {
    h.small_gemm_rows = 0;
    h.small_gemm_flops = 0;
    f.dropped.push_back(std::string(param_names[small_gemm]) + " (few-row GEMMs then run at fp16_tflops)");
  }
  if (theta[attention] <= 0) {
    h.attention_flops = 0;
    f.dropped.push_back(std::string(param_names[attention]) + " (decode attention then runs at fp16_tflops)");
  }
  if (theta[large_batch] <= 0) {
    if (form.large_rows > 0)
      f.dropped.push_back(std::string(param_names[large_batch]) + " (GEMMs of many rows then run at fp16_tflops)");
    h.large_batch_rows = 0;
    h.large_batch_flops = 0;
  }
  if (theta[prefill_attention] <= 0) {
    h.prefill_attention_flops = 0;
    f.dropped.push_back(std::string(param_names[prefill_attention]) + " (prefill attention then runs at the decode rate)");
  }
  h.bandwidth = read_bytes_per_s / tp;  // the ranks share the machine's memory bandwidth
  h.host_bandwidth = h.bandwidth;
  // An all-reduce whose bytes cost nothing measurable: the link is as fast as memory.
  if (tp == 1 || !std::isfinite(h.link_bandwidth)) h.link_bandwidth = h.bandwidth;
  h.link_latency = 0;
  h.step_overhead = 0;
  const Residuals r = predict_points(m, h, tp, block_size, repeats, points);
  f.rms_relative_error = r.rms;
  f.max_relative_error = r.max;
  f.points = std::move(points);
  return f;
}

}  // namespace

Residuals predict_points(const sim::ModelPreset& m, const sim::Hardware& h, std::uint32_t tp, std::uint32_t block_size,
                         std::uint32_t repeats, std::vector<CalibrationPoint>& points) {
  const sim::CostModel model(m, h, sim::Parallelism{sim::ParallelKind::tensor, tp}, block_size);
  Residuals r;
  double sq = 0;
  for (auto& p : points) {
    const sim::StepCost c = model.step(calibration_step_shape(p.shape, repeats));
    p.predicted_s = c.seconds;
    const auto worst = std::max_element(c.by_op.begin(), c.by_op.end()) - c.by_op.begin();
    p.bound = std::string(sim::to_string(static_cast<sim::Op>(worst)));
    const double rel = p.predicted_s / p.measured_s - 1;
    sq += rel * rel;
    r.max = std::max(r.max, std::abs(rel));
  }
  r.rms = points.empty() ? 0 : std::sqrt(sq / double(points.size()));
  return r;
}

double median_pass_spread(const std::vector<CalibrationPoint>& points) {
  if (points.empty() || points.front().pass_s.size() < 2) return 0;
  std::vector<double> spreads;
  for (const auto& p : points) spreads.push_back(p.spread);
  return median(std::move(spreads));
}

sim::StepShape calibration_step_shape(const CalibrationShape& s, std::uint32_t repeats) {
  sim::StepShape out;
  for (std::uint32_t i = 0; s.chunk > 0 && i < s.prompts; ++i) out.add(s.chunk, s.offset + s.chunk, true);
  // The median timed step of a decoding sequence computes position context + repeats / 2.
  for (std::uint32_t i = 0; i < s.batch; ++i) out.add(1, s.context + repeats / 2 + 1, true);
  return out;
}

CalibrationFit fit_calibration(const sim::ModelPreset& m, std::uint32_t tp, std::uint32_t block_size,
                               std::uint32_t repeats, const std::vector<CalibrationPoint>& points,
                               double read_bytes_per_s, bool fit_overlap) {
  const auto small_rows = static_cast<std::uint32_t>(kernels::cpu::default_panel_min_rows);
  std::optional<CalibrationFit> best;
  std::string refused;  // a candidate's refusal: thrown when every candidate refuses
  const std::vector<std::uint32_t> large = large_batch_candidates(points);
  // Per threshold, the rates found at the last overlap: where the next overlap's fit starts too.
  std::vector<std::array<double, param_count>> last(large.size());
  for (int o = 0; o <= (fit_overlap ? overlap_steps : 0); ++o)
    for (std::size_t i = 0; i < large.size(); ++i) {
      const double overlap = double(o) / overlap_steps;
      const std::array<double, param_count> start = last[i];
      try {
        CalibrationFit f = fit_at(m, tp, block_size, repeats, points, read_bytes_per_s, {small_rows, large[i], overlap},
                                  o > 0 ? &start : nullptr, last[i]);
        if (!best || f.rms_relative_error < best->rms_relative_error) best = std::move(f);
      } catch (const std::runtime_error& e) {  // every GEMM free at this form; another may fit
        refused = e.what();
      }
    }
  if (!best) throw std::runtime_error(refused);
  best->overlap_fitted = fit_overlap;
  return std::move(*best);
}

std::vector<double> non_negative_least_squares(const std::vector<std::vector<double>>& a, const std::vector<double>& b) {
  const std::size_t m = a.size(), n = m > 0 ? a[0].size() : 0;
  std::vector<double> x(n, 0);
  std::vector<bool> passive(n, false);
  const auto gradient = [&] {  // A^T (b - A x)
    std::vector<double> w(n, 0);
    for (std::size_t i = 0; i < m; ++i) {
      double r = b[i];
      for (std::size_t j = 0; j < n; ++j) r -= a[i][j] * x[j];
      for (std::size_t j = 0; j < n; ++j) w[j] += a[i][j] * r;
    }
    return w;
  };
  // Least squares on the passive columns (normal equations, Gaussian elimination).
  const auto solve_passive = [&] {
    std::vector<std::size_t> cols;
    for (std::size_t j = 0; j < n; ++j)
      if (passive[j]) cols.push_back(j);
    const std::size_t k = cols.size();
    std::vector<std::vector<double>> g(k, std::vector<double>(k + 1, 0));
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t p = 0; p < k; ++p) {
        for (std::size_t q = 0; q < k; ++q) g[p][q] += a[i][cols[p]] * a[i][cols[q]];
        g[p][k] += a[i][cols[p]] * b[i];
      }
    for (std::size_t c = 0; c < k; ++c) {
      std::size_t piv = c;
      for (std::size_t r = c + 1; r < k; ++r)
        if (std::abs(g[r][c]) > std::abs(g[piv][c])) piv = r;
      std::swap(g[c], g[piv]);
      if (std::abs(g[c][c]) < 1e-300) continue;
      for (std::size_t r = 0; r < k; ++r) {
        if (r == c) continue;
        const double f = g[r][c] / g[c][c];
        for (std::size_t q = c; q <= k; ++q) g[r][q] -= f * g[c][q];
      }
    }
    std::vector<double> z(n, 0);
    for (std::size_t c = 0; c < k; ++c) z[cols[c]] = std::abs(g[c][c]) < 1e-300 ? 0 : g[c][k] / g[c][c];
    return z;
  };
  // Tolerances relative to the problem's scale (|A|_max |b|_max), so that scaling A or b does not
  // change which columns are used.
  double a_max = 0, b_max = 0;
  for (std::size_t i = 0; i < m; ++i) {
    b_max = std::max(b_max, std::abs(b[i]));
    for (std::size_t j = 0; j < n; ++j) a_max = std::max(a_max, std::abs(a[i][j]));
  }
  if (a_max == 0 || b_max == 0) return x;
  const double tol = 1e-12 * a_max * b_max;  // on the gradient A^T (b - A x)
  const double x_tol = 1e-12 * b_max / a_max;  // on a solution's entries
  for (std::size_t outer = 0; outer < 3 * n + 3; ++outer) {
    const std::vector<double> w = gradient();
    std::size_t best = n;
    for (std::size_t j = 0; j < n; ++j)
      if (!passive[j] && w[j] > tol && (best == n || w[j] > w[best])) best = j;
    if (best == n) break;
    passive[best] = true;
    for (std::size_t inner = 0; inner < 3 * n + 3; ++inner) {
      const std::vector<double> z = solve_passive();
      bool feasible = true;
      for (std::size_t j = 0; j < n; ++j) feasible = feasible && (!passive[j] || z[j] > x_tol);
      if (feasible) {
        x = z;
        break;
      }
      double alpha = 1;
      for (std::size_t j = 0; j < n; ++j)
        if (passive[j] && z[j] <= x_tol) alpha = std::min(alpha, x[j] / (x[j] - z[j]));
      for (std::size_t j = 0; j < n; ++j) {
        x[j] += alpha * (z[j] - x[j]);
        if (passive[j] && x[j] <= x_tol) {
          passive[j] = false;
          x[j] = 0;
        }
      }
    }
  }
  return x;
}

}  // namespace actorlm::bench
