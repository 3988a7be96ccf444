#pragma once
// `actorlm calibrate`: the real cpu backend's step times on this machine over a grid of step
// shapes, and the simulator's cost model (sim/model/cost_model.hpp) fitted to them, as one
// hardware catalogue entry per tensor-parallel degree ("a GPU" = one rank's cores). Measuring and
// writing in calibrate.cpp, the fit in calibrate_fit.cpp.
//
// Measuring: the backend's shards run steps directly (no actors, no scheduler), built as the
// scheduler builds them: a prefill chunk of `chunk` tokens after `offset` cached positions, and/or
// `batch` decoding sequences at `context` positions, greedy sampling. The KV blocks are written
// before any step reads them (untouched pages would read as the kernel's zero page, for free);
// their contents do not change the time. Each shape, in each of `passes` passes over the grid:
// one untimed step, then `repeats` steps (a decode sequence's context grows by one per step);
// its time is the median over passes of each pass's median.
//
// Fitting: with the memory time set aside and no overlap, the cost model's step time is linear in
// the inverses of its compute rates and in its per-kernel cost: t = sum_k theta_k phi_k(shape),
// each phi_k read off the cost model itself (every parameter but one set to a free value), so the
// fit cannot drift from what the simulator computes. Non-negative least squares on relative errors
// gives the thetas (with a partial overlap, repeated on the model's slopes, Gauss-Newton):
//   small_gemm_tflops   GEMMs below small_gemm_rows rows (kernels/cpu/model/matmul.hpp:
//                       default_panel_min_rows, where F16 / BF16 weights go from the kernels to
//                       sgemm; integer weights take the same kernels on both sides, so for them
//                       the two rates fit alike and the dequantizing term to about nothing)
//   fp16_tflops         larger GEMMs
//   gemm_dequant_gweights_per_s  the dequantizing pass before F16 / BF16 sgemm
//   attention_tflops    decode attention (one query per sequence, over its paged KV)
//   prefill_attention_tflops  prefill attention (a chunk's queries over the chunk and the cache)
//   kernel_launch_us    per operator: the thread pool's dispatch and the operators' fixed costs
//   large_batch_gemm_tflops  GEMMs of large_batch_gemm_rows rows or more (steps of many prompts),
//                       the threshold chosen among the step sizes above 512 tokens of the
//                       grid's multi-prompt shapes as the one whose fit is best
//   link_bandwidth_gbps the all-reduce's bytes (tensor parallel only)
//   memory_compute_overlap  the share of the shorter of a kernel's memory and arithmetic times
//                       hidden under the longer: 0 (their sum) unless asked to fit it
//                       (CalibrateOptions::fit_overlap), then chosen among 0, 0.05, ..., 1 as
//                       the one whose fit is best (with the large-batch threshold: every pair is
//                       fitted). It fits the grid better, yet served runs worse (README, run 57):
//                       the few-row decodes it makes cheaper were what stood in for serving's own
//                       costs, which the model lacks.
// Not fitted: the memory bandwidth is measured (a read benchmark on the same threads); the engine's own
// time per step is measured through an in-process engine (step_overhead_us); a per-all-reduce
// latency is constant per step as the per-kernel count nearly is, so the grid cannot tell it
// from kernel_launch, which carries it (link_latency_us is written as 0).

#include "actors/config/config.hpp"
#include "sim/model/catalogue.hpp"
#include "sim/model/cost_model.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace actorlm::bench {

struct CalibrationShape {
  std::uint32_t chunk = 0;    // prefill tokens of each prefilling sequence (0: none)
  std::uint32_t offset = 0;   // positions of each already cached
  std::uint32_t prompts = 1;  // prefilling sequences (a step that starts several requests at once)
  std::uint32_t batch = 0;    // decoding sequences (0: none)
  std::uint32_t context = 0;  // positions each decoding sequence attends to
  std::string describe() const;  // "prefill 256 @ 1024 + decode 8 x 512", "prefill 4 x 128 @ 0"
};

struct CalibrationPoint {
  CalibrationShape shape;
  double measured_s = 0;   // median step time
  double spread = 0;       // (max - min) / median of the passes' medians
  std::vector<double> pass_s;  // each pass's median step time, in pass order (empty: not kept)
  double predicted_s = 0;  // the fitted cost model
  std::string bound;       // the operator that costs most in the prediction
};

struct CalibrationFit {
  std::uint32_t tp = 1;
  std::int32_t threads_per_rank = 1;
  sim::Hardware hardware;  // key: NAME-tpN
  std::vector<CalibrationPoint> points;
  double rms_relative_error = 0;
  double max_relative_error = 0;
  double pass_drift = 0;  // the grid's total step time in the last pass over the first's, minus 1
  // The shapes' median spread between passes ((max - min) / median of a shape's pass medians; 0
  // with one pass): how much the machine's speed moved while it measured. Above
  // noisy_pass_spread, the residuals describe that as much as the model.
  double median_pass_spread = 0;
  std::vector<std::string> dropped;  // rates the fit found free, left out (the model's default applies)
  bool overlap_fitted = false;       // hardware.memory_overlap fitted (otherwise 0)
};

// A median pass spread above this (the machine's speed moving by more than +-5 %, the fidelity
// goal's mean error) draws a warning.
inline constexpr double noisy_pass_spread = 0.10;

struct Calibration {
  std::string model_path;
  sim::ModelPreset model;       // the architecture the loader read; weight_bytes as held
  double read_bytes_per_s = 0;  // measured, all threads
  // The same read over a buffer the size of the weights (at TP 1), the median over passes: a
  // model held by the last-level cache reads faster. Reported, not used by the cost model.
  double weight_sized_read_bytes_per_s = 0;
  double memory_bytes = 0;      // the machine's RAM (each entry's memory_mib: this / tp)
  std::vector<CalibrationFit> fits;
};

struct CalibrateOptions {
  config::Config config;  // backend cpu; model.path empty: the default model
  // Tensor-parallel degrees, one fit each; empty: 1, and 2 when the model splits over 2 ranks
  // (SmolLM2-135M's 9 heads do not). A degree given here that the model refuses is an error.
  std::vector<std::uint32_t> tp;
  std::vector<CalibrationShape> grid;  // empty: default_calibration_grid()
  std::uint32_t repeats = 3;  // timed steps per shape and pass
  std::uint32_t passes = 3;   // over the whole grid
  bool fit_overlap = false;   // fit memory_compute_overlap (otherwise 0: the sum)
  std::string name = "cpu-local";
  std::function<void(const std::string&)> progress;
  // Runs before pass k (k = 1 .. passes - 1), while no shard is loaded: a caller's own
  // measurements (bench fidelity's served cases) interleaved with the passes, so that the
  // calibration's medians describe the machine over the time they took, not only before it.
  std::function<void(std::uint32_t pass)> between_passes;
};

// Prefill chunks 8..512 at offsets 0, 1024 and 2048; several prompts prefilled in one step (up
// to 2048 tokens); decode batches 1..128 at contexts 64, 512 and 2048 (up to 64Ki cached tokens);
// a few mixed steps.
std::vector<CalibrationShape> default_calibration_grid();
// Ten shapes, enough to fit every parameter (one of them prefills three prompts): for tests and --quick.
std::vector<CalibrationShape> quick_calibration_grid();

// The read bandwidth is measured once per pass and the engine's own time per step at least three
// times, spread over the passes; each is the median of its measurements.
// Throws std::invalid_argument for a configuration the cpu backend refuses and
// std::runtime_error when the fit finds every GEMM free. A rate it finds free is left out of the
// entry (CalibrationFit::dropped) and the cost model's fallback applies (large GEMMs then run at
// the few-row rate).
Calibration run_calibration(const CalibrateOptions&);

// The step a shape's timed steps make, as the cost model sees it (their median step: a decoding
// sequence's context grows by one per timed step).
sim::StepShape calibration_step_shape(const CalibrationShape&, std::uint32_t repeats);

// The cost model fitted to measured points, as run_calibration fits its measurements: at every
// candidate large_batch_gemm_rows (none, and each distinct step size from 513 tokens on of the
// points that prefill several prompts together) and, with `fit_overlap`, memory overlap (0, 0.05,
// ..., 1; otherwise 0), the pair whose fit predicts the points best (least rms relative error;
// the smaller overlap and threshold on a tie); small_gemm_rows is default_panel_min_rows (0 when
// the few-row rate is dropped). `read_bytes_per_s`: the measured read bandwidth of all ranks;
// `repeats`: the timed steps per shape (a decode sequence's context grows by one per step). A
// candidate whose fit finds every GEMM free is skipped; throws std::runtime_error when every
// candidate's does. The result's hardware has no step overhead (run_calibration measures it
// apart).
CalibrationFit fit_calibration(const sim::ModelPreset&, std::uint32_t tp, std::uint32_t block_size,
                               std::uint32_t repeats, const std::vector<CalibrationPoint>&,
                               double read_bytes_per_s, bool fit_overlap = false);

// The cost model's prediction on `h` for each point (predicted_s, and the costliest operator as
// bound), and the relative errors' rms and max over them, as calibrate reports its residuals.
struct Residuals {
  double rms = 0, max = 0;
};
Residuals predict_points(const sim::ModelPreset&, const sim::Hardware& h, std::uint32_t tp, std::uint32_t block_size,
                         std::uint32_t repeats, std::vector<CalibrationPoint>& points);

// The median over the points of their passes' spread (CalibrationPoint::spread); 0 with fewer
// than two passes (CalibrationFit::median_pass_spread).
double median_pass_spread(const std::vector<CalibrationPoint>& points);

// A hardware catalogue (`[sim] hardware_catalogue`) holding [runtime] and one [gpu.KEY] per fit,
// with the measurements and residuals as comments.
std::string hardware_catalogue_toml(const Calibration&);

// Non-negative least squares: x >= 0 minimising |A x - b|^2 (Lawson and Hanson's active set),
// A given by rows. Columns that are all zero get 0.
std::vector<double> non_negative_least_squares(const std::vector<std::vector<double>>& a,
                                               const std::vector<double>& b);

}  // namespace actorlm::bench
