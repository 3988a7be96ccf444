// tools/bench/calibrate.hpp: the non-negative least squares solver over seeded random problems
// (exact recovery, the optimality (KKT) conditions, zero columns), the fit on step times the cost
// model made for a known machine (it finds the large-batch threshold and every rate), and one quick
// calibration of the default model whose predictions are the cost model's and whose catalogue entry
// reads back as the fitted hardware. Nothing here asserts on how well the fit matches this machine:
// that is a benchmark figure, and the machine is shared.
#define BOOST_TEST_MODULE tools_bench_calibrate
#include "tools/bench/calibrate.hpp"

#include "sim/model/cost_model.hpp"

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace actorlm;
using namespace actorlm::bench;
namespace tt = boost::test_tools;
using Matrix = std::vector<std::vector<double>>;  // [rows][columns]

// A random rows x cols matrix with entries uniform in [-1, 1]: of full column rank (almost
// surely) when rows >= cols.
Matrix random_matrix(std::mt19937_64& rng, std::size_t rows, std::size_t cols) {
  std::uniform_real_distribution<double> u(-1, 1);
  Matrix a(rows, std::vector<double>(cols));
  for (auto& row : a)
    for (double& v : row) v = u(rng);
  return a;
}

// x >= 0 with about a third of its entries exactly 0, the others in [0.1, 10].
std::vector<double> random_solution(std::mt19937_64& rng, std::size_t n) {
  std::vector<double> x(n);
  for (double& v : x) v = rng() % 3 == 0 ? 0 : std::uniform_real_distribution<double>(0.1, 10)(rng);
  return x;
}

std::vector<double> times(const Matrix& a, const std::vector<double>& x) {
  std::vector<double> b(a.size(), 0);
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < x.size(); ++j) b[i] += a[i][j] * x[j];
  return b;
}

// A^T (b - A x): minus half the gradient of |A x - b|^2.
std::vector<double> descent(const Matrix& a, const std::vector<double>& b, const std::vector<double>& x) {
  const std::vector<double> ax = times(a, x);
  std::vector<double> w(x.size(), 0);
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < x.size(); ++j) w[j] += a[i][j] * (b[i] - ax[i]);
  return w;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(recovers_a_non_negative_solution_of_a_consistent_full_rank_system) {
  std::mt19937_64 rng(20261201);
  for (int trial = 0; trial < 500; ++trial) {
    const std::size_t n = 1 + rng() % 8, m = n + rng() % 12;
    const Matrix a = random_matrix(rng, m, n);
    const std::vector<double> want = random_solution(rng, n);
    const std::vector<double> got = non_negative_least_squares(a, times(a, want));
    BOOST_TEST_REQUIRE(got.size() == n, "trial " << trial);
    const double scale = std::max(1.0, max_abs(want));
    for (std::size_t j = 0; j < n; ++j)
      BOOST_TEST(std::abs(got[j] - want[j]) <= 1e-9 * scale,
                 "trial " << trial << " (" << m << " x " << n << "): x[" << j << "] = " << got[j] << ", want " << want[j]);
  }
}

BOOST_AUTO_TEST_CASE(meets_the_optimality_conditions_for_any_right_hand_side) {
  // x is the minimiser over x >= 0 exactly when, with w = A^T (b - A x): x >= 0, w_j <= 0 where
  // x_j = 0 and w_j = 0 where x_j > 0 (the problem is convex, so these suffice).
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1);
  for (int trial = 0; trial < 500; ++trial) {
    const std::size_t n = 1 + rng() % 8, m = n + rng() % 12;
    Matrix a = random_matrix(rng, m, n);
    // Columns of different magnitudes, as the calibration's features are before scaling.
    for (std::size_t j = 0; j < n; ++j) {
      const double s = std::pow(10.0, std::uniform_real_distribution<double>(-2, 2)(rng));
      for (auto& row : a) row[j] *= s;
    }
    std::vector<double> b(m);
    for (double& v : b) v = normal(rng);
    const std::vector<double> x = non_negative_least_squares(a, b);
    BOOST_TEST_REQUIRE(x.size() == n, "trial " << trial);
    const std::vector<double> w = descent(a, b, x);
    double norm_a = 0, norm_b = 0;  // |w| <= |A| |b| at x = 0: the scale of the tolerance
    for (const auto& row : a)
      for (double v : row) norm_a += v * v;
    for (double v : b) norm_b += v * v;
    const double tol = 1e-9 * std::sqrt(norm_a * norm_b);
    for (std::size_t j = 0; j < n; ++j) {
      BOOST_TEST(x[j] >= 0, "trial " << trial << ": x[" << j << "] = " << x[j]);
      if (x[j] > 0) BOOST_TEST(std::abs(w[j]) <= tol, "trial " << trial << ": x[" << j << "] > 0, w = " << w[j]);
      else BOOST_TEST(w[j] <= tol, "trial " << trial << ": x[" << j << "] = 0, w = " << w[j]);
    }
  }
}

BOOST_AUTO_TEST_CASE(gives_the_same_answer_whatever_the_scale_of_the_problem) {
  BOOST_TEST(non_negative_least_squares({{1e-7}}, {1e-6}).at(0) == 10.0, tt::tolerance(1e-12));
  BOOST_TEST(non_negative_least_squares({{1}}, {1e-13}).at(0) == 1e-13, tt::tolerance(1e-12));
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    const std::size_t n = 2 + rng() % 5, m = n + rng() % 8;
    const Matrix a = random_matrix(rng, m, n);
    std::vector<double> b(m);
    for (auto& v : b) v = double(rng() % 2001) / 1000.0 - 1.0;
    const std::vector<double> x = non_negative_least_squares(a, b);
    for (const double s : {1e-9, 1e9}) {
      Matrix as = a;
      for (auto& row : as)
        for (auto& v : row) v *= s;
      const std::vector<double> xs = non_negative_least_squares(as, b);
      for (std::size_t j = 0; j < n; ++j)
        BOOST_TEST(std::abs(xs[j] * s - x[j]) <= 1e-9 * std::max(1.0, max_abs(x)), "trial " << trial << " scale " << s);
    }
  }
}

BOOST_AUTO_TEST_CASE(gives_zero_to_a_column_that_is_all_zero) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 2 + rng() % 7, m = n + rng() % 12;
    Matrix a = random_matrix(rng, m, n);
    std::vector<double> want = random_solution(rng, n);
    const std::size_t zero = rng() % n;
    for (auto& row : a) row[zero] = 0;
    const std::vector<double> b = times(a, want);  // whatever want[zero] is, it adds nothing
    want[zero] = 0;
    const std::vector<double> got = non_negative_least_squares(a, b);
    BOOST_TEST_REQUIRE(got.size() == n, "trial " << trial);
    BOOST_TEST(got[zero] == 0, "trial " << trial);
    const double scale = std::max(1.0, max_abs(want));
    for (std::size_t j = 0; j < n; ++j)
      BOOST_TEST(std::abs(got[j] - want[j]) <= 1e-9 * scale, "trial " << trial << ": x[" << j << "] = " << got[j]);
  }
  // Only zero columns: nothing to fit.
  BOOST_TEST(non_negative_least_squares(Matrix(3, std::vector<double>(2, 0)), {1, 2, 3}) == std::vector<double>(2, 0),
             tt::per_element());
}

namespace {

// Step times that a known machine gives on the default grid, by the cost model itself: few-row
// GEMMs faster below 96 rows (the kernels' threshold), large batches slower from `large_rows`
// rows, no dequantizing pass, `overlap` of memory and arithmetic; and the fit of them, the overlap
// fitted too.
struct PlantedFit {
  sim::Hardware truth;
  CalibrationFit fit;
};
PlantedFit planted_fit(std::uint32_t large_rows, double overlap = 0) {
  const sim::ModelPreset model = sim::Catalogue::builtin().model("smollm2-135m-instruct-q4_1");
  const double bandwidth = 20e9;
  sim::Hardware h;
  h.memory_bytes = 1e18;
  h.bandwidth = h.host_bandwidth = h.link_bandwidth = bandwidth;
  h.memory_overlap = overlap;
  h.small_gemm_rows = 96;
  h.small_gemm_flops = 0.50e12;
  h.flops = 0.35e12;
  h.large_batch_rows = large_rows;
  h.large_batch_flops = 0.25e12;
  // Decode attention compute-bound (at 0.06e12 its arithmetic would equal its KV read to the
  // last bit, so that on the roofline its rate could be anything from there up).
  h.attention_flops = 0.04e12;
  h.prefill_attention_flops = 0.10e12;
  h.kernel_launch = 1.5e-6;
  const sim::CostModel truth(model, h, sim::Parallelism{sim::ParallelKind::tensor, 1}, 16);
  const std::uint32_t repeats = 3;
  std::vector<CalibrationPoint> points;
  for (const auto& shape : default_calibration_grid()) {
    CalibrationPoint p;
    p.shape = shape;
    p.measured_s = truth.step_seconds(calibration_step_shape(shape, repeats));
    points.push_back(p);
  }
  return {h, fit_calibration(model, 1, 16, repeats, points, bandwidth, /*fit_overlap=*/true)};
}

// The fitted rates are the planted ones, within 1e-6 (relative).
void check_planted_rates(const sim::Hardware& planted, const sim::Hardware& fitted) {
  const auto close = [](double got, double want) { return std::abs(got / want - 1) < 1e-6; };
  BOOST_TEST(close(fitted.small_gemm_flops, planted.small_gemm_flops), fitted.small_gemm_flops);
  BOOST_TEST(close(fitted.flops, planted.flops), fitted.flops);
  BOOST_TEST(close(fitted.large_batch_flops, planted.large_batch_flops), fitted.large_batch_flops);
  BOOST_TEST(close(fitted.attention_flops, planted.attention_flops), fitted.attention_flops);
  BOOST_TEST(close(fitted.prefill_attention_flops, planted.prefill_attention_flops), fitted.prefill_attention_flops);
  BOOST_TEST(close(fitted.kernel_launch, planted.kernel_launch), fitted.kernel_launch);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_fit_finds_the_large_batch_threshold_and_the_rates_of_times_the_cost_model_made) {
  // Planted at 768 and at 1,024 tokens, two step sizes of the grid (6 x 128 and 2 x 512 prompts).
  for (const std::uint32_t rows : {768u, 1024u}) {
    const auto [h, f] = planted_fit(rows);
    BOOST_TEST(f.hardware.memory_overlap == 0);  // the sum, as planted
    BOOST_TEST(f.hardware.small_gemm_rows == 96u);
    BOOST_TEST(f.hardware.large_batch_rows == rows);
    BOOST_TEST(f.rms_relative_error < 1e-9);
    check_planted_rates(h, f.hardware);
  }
}

BOOST_AUTO_TEST_CASE(the_fit_finds_a_partial_overlap_of_memory_and_arithmetic_and_the_rates_beside_it) {
  // Overlaps on the fit's steps of 0.05, among them the roofline (1); 0 is the test above.
  for (const double overlap : {0.35, 0.6, 1.0}) {
    const auto [h, f] = planted_fit(1024, overlap);
    BOOST_TEST_CONTEXT("overlap " << overlap) {
      BOOST_TEST(f.hardware.memory_overlap == overlap, tt::tolerance(1e-12));
      BOOST_TEST(f.hardware.large_batch_rows == 1024u);
      BOOST_TEST(f.rms_relative_error < 1e-9);
      check_planted_rates(h, f.hardware);
    }
  }
}

BOOST_AUTO_TEST_CASE(unless_asked_to_fit_the_overlap_the_fit_keeps_the_sum) {
  const auto [h, fitted] = planted_fit(1024, 0.6);
  BOOST_TEST(fitted.overlap_fitted);
  std::vector<CalibrationPoint> points = fitted.points;
  const CalibrationFit f = fit_calibration(sim::Catalogue::builtin().model("smollm2-135m-instruct-q4_1"), 1, 16, 3,
                                           points, h.bandwidth);
  BOOST_TEST(!f.overlap_fitted);
  BOOST_TEST(f.hardware.memory_overlap == 0);
  BOOST_TEST(f.rms_relative_error > 0.01);  // the planted overlap is not there to fit
}

BOOST_AUTO_TEST_CASE(a_threshold_between_two_step_sizes_of_the_grid_is_found_as_the_next_size_up) {
  // 1,536 tokens: the grid has steps of 1,024 and of 2,048 and none between, so the thresholds
  // 1,025 to 2,048 describe its times alike; the fit names the grid's size, 2,048, and fits exactly.
  const auto [h, f] = planted_fit(1536);
  BOOST_TEST(f.hardware.large_batch_rows == 2048u);
  BOOST_TEST(f.rms_relative_error < 1e-9);
  BOOST_TEST(std::abs(f.hardware.large_batch_flops / h.large_batch_flops - 1) < 1e-6);
}

namespace {

// The quick grid at TP 1 on the default model, `repeats` steps per shape.
CalibrateOptions quick_options(std::uint32_t repeats) {
  ::setenv("ACTORLM_MODELS_DIR", ACTORLM_MODELS_DIR, 1);  // the default model
  CalibrateOptions o;
  o.config.engine.backend = config::Backend::cpu;
  o.tp = {1};
  o.grid = quick_calibration_grid();
  o.repeats = repeats;
  return o;
}

// Whether a progress line reports the engine's own time per step as the median of 3 measurements.
bool three_overheads_in(const std::string& line) {
  return line.find("in-process engine, median of 3)") != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_quick_calibration_predicts_with_the_cost_model_and_writes_a_catalogue_that_reads_back) {
  CalibrateOptions o = quick_options(2);
  // Three passes (medians): with one, a burst of load from the tests beside it once made every
  // shape's time noise enough that the fit found every GEMM free (seen once in four CI runs).
  o.passes = 3;
  o.name = "test-machine";
  // The caller's work runs between the passes (bench fidelity's cases), in order.
  std::vector<std::string> events;
  bool three_overheads = false;  // the engine's own time per step: one measurement per pass
  o.progress = [&](const std::string& line) {
    if (const auto at = line.find("; pass "); at != std::string::npos) events.push_back(line.substr(at + 2, 11));
    three_overheads = three_overheads || three_overheads_in(line);
  };
  o.between_passes = [&](std::uint32_t pass) { events.push_back("between " + std::to_string(pass)); };
  const Calibration c = run_calibration(o);
  BOOST_TEST(events == (std::vector<std::string>{"pass 1 of 3", "between 1", "pass 2 of 3", "between 2", "pass 3 of 3"}),
             tt::per_element());
  BOOST_TEST(three_overheads);

  BOOST_TEST_REQUIRE(c.fits.size() == 1u);
  const CalibrationFit& fit = c.fits[0];
  BOOST_TEST(fit.tp == 1u);
  BOOST_TEST(fit.hardware.key == "test-machine-tp1");
  BOOST_TEST_REQUIRE(fit.points.size() == o.grid.size());
  // The engine's own time per step was measured (an in-process engine on the cpu backend); the
  // grid's predictions are of the shards alone, so without it.
  BOOST_TEST(fit.hardware.step_overhead > 0);
  BOOST_TEST(fit.hardware.step_overhead < 0.1);  // seconds: far below any step of the grid
  // Not asked to fit the overlap: the sum.
  BOOST_TEST(fit.hardware.memory_overlap == 0);
  BOOST_TEST(!fit.overlap_fitted);
  BOOST_TEST(std::isfinite(fit.pass_drift));
  // How far the passes spread: the median over the shapes of each one's (max - min) / median
  // (for an even count the upper of the middle two, as calibrate's other medians).
  std::vector<double> spreads;
  for (const auto& p : fit.points) spreads.push_back(p.spread);
  std::sort(spreads.begin(), spreads.end());
  BOOST_TEST(fit.median_pass_spread == spreads[spreads.size() / 2]);
  BOOST_TEST(fit.median_pass_spread > 0);  // three passes of real steps never time alike
  sim::Hardware shards_alone = fit.hardware;
  shards_alone.step_overhead = 0;
  const sim::CostModel model(c.model, shards_alone, {sim::ParallelKind::tensor, 1}, 16);
  for (std::size_t i = 0; i < fit.points.size(); ++i) {
    const CalibrationPoint& p = fit.points[i];
    const CalibrationShape& s = o.grid[i];
    BOOST_TEST_CONTEXT(s.describe()) {
      BOOST_TEST((p.shape.chunk == s.chunk && p.shape.offset == s.offset && p.shape.prompts == s.prompts &&
                  p.shape.batch == s.batch && p.shape.context == s.context));
      BOOST_TEST(p.measured_s > 0);
      BOOST_TEST(p.predicted_s > 0);
      // The shape as calibrate.hpp states it: each prefill chunk after its offset, and each
      // decoding sequence at the position of the median timed step.
      sim::StepShape shape;
      for (std::uint32_t k = 0; s.chunk > 0 && k < s.prompts; ++k) shape.add(s.chunk, s.offset + s.chunk, true);
      for (std::uint32_t k = 0; k < s.batch; ++k) shape.add(1, s.context + o.repeats / 2 + 1, true);
      BOOST_TEST(p.predicted_s == model.step_seconds(shape), tt::tolerance(1e-12));
    }
  }

  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("calibrate_test_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(path) << hardware_catalogue_toml(c);
  const sim::Catalogue read = sim::Catalogue::load(path.string(), "");
  std::filesystem::remove(path);
  const sim::Hardware& want = fit.hardware;
  const sim::Hardware& got = read.hardware(want.key);
  // The file prints rates with 6 significant digits (%.6g): within 5e-6 of the value, relative.
  const auto close = tt::tolerance(1e-5);
  BOOST_TEST(got.name == want.name);
  BOOST_TEST(got.link == want.link);
  // Written in whole MiB: within half a MiB (relative, that is 1.1e-5 of this machine's 24,105.3
  // MiB, beyond the rates' 1e-5).
  BOOST_TEST(std::abs(got.memory_bytes - want.memory_bytes) <= 0.5 * 1024 * 1024);
  BOOST_TEST(got.bandwidth == want.bandwidth, close);
  BOOST_TEST(got.flops == want.flops, close);
  BOOST_TEST(got.link_bandwidth == want.link_bandwidth, close);
  BOOST_TEST(got.link_latency == want.link_latency, close);
  BOOST_TEST(got.host_bandwidth == want.host_bandwidth, close);
  BOOST_TEST(got.compute_efficiency == want.compute_efficiency, close);
  BOOST_TEST(got.memory_efficiency == want.memory_efficiency, close);
  BOOST_TEST(got.link_efficiency == want.link_efficiency, close);
  BOOST_TEST(got.kernel_launch == want.kernel_launch, close);
  BOOST_TEST(got.cuda_context_bytes == want.cuda_context_bytes, close);
  BOOST_TEST(got.small_gemm_rows == want.small_gemm_rows);
  BOOST_TEST(got.small_gemm_flops == want.small_gemm_flops, close);
  BOOST_TEST(got.gemm_weight_rate == want.gemm_weight_rate, close);
  BOOST_TEST(got.attention_flops == want.attention_flops, close);
  BOOST_TEST(got.prefill_attention_flops == want.prefill_attention_flops, close);
  BOOST_TEST(got.step_overhead == want.step_overhead, close);
  BOOST_TEST(got.memory_overlap == want.memory_overlap, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_single_pass_calibration_never_runs_the_callers_work_and_still_measures_the_overhead_three_times) {
  CalibrateOptions o = quick_options(1);
  o.passes = 1;
  std::uint32_t calls = 0;
  o.between_passes = [&](std::uint32_t) { ++calls; };
  bool three_overheads = false;
  o.progress = [&](const std::string& line) { three_overheads = three_overheads || three_overheads_in(line); };
  bool refused = false;
  try {
    (void)run_calibration(o);
  } catch (const std::runtime_error& e) {
    // One pass of one step per shape: a loaded machine may make the fit find every GEMM free,
    // the refusal calibrate documents, before the overhead is reported.
    refused = true;
    BOOST_TEST_MESSAGE("the fit refused a single noisy pass: " << e.what());
  }
  BOOST_TEST(calls == 0u);
  if (!refused) BOOST_TEST(three_overheads);
}
