#pragma once
// Metrics of one simulated (or measured) run: per-request latencies, throughput, goodput under
// SLOs, percentiles, KV utilization and batch size over time. Plain C++ (no CAF).
//
// Definitions (times in s in the outputs, ns in the inputs):
//   TTFT = first_token - arrival;  E2E = finished - arrival;  queue = first_scheduled - arrival
//   TPOT = (E2E - TTFT) / (output_tokens - 1), for requests with >= 2 output tokens
//   ITL  = every gap between consecutive entries of token_ns (all requests pooled)
//   Percentiles are NEAREST-RANK: p-th = the smallest sample x with at least p % of the samples
//   <= x, i.e. sorted[ceil(p/100 * n) - 1]; always an observed value, so tests can be exact.
//   Latency statistics cover completed requests only.
//   duration = first arrival (of any request) to last finish (of a completed request).

#include "actors/scheduler/request.hpp"  // scheduler::StepRecord

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace actorlm::sim {

// What the driver records for one request.
struct RequestTiming {
  std::uint64_t id = 0;
  std::int64_t arrival_ns = 0;      // ns since the run started
  std::int64_t first_token_ns = -1; // ns; -1: none
  std::int64_t finished_ns = -1;    // ns; -1: not finished
  std::uint32_t input_tokens = 0;   // tokens
  std::uint32_t output_tokens = 0;  // tokens generated (sample 0)
  std::vector<std::int64_t> token_ns;  // ns, time of every output token of sample 0
  bool completed = false;           // false: refused, aborted or still running at the end
  std::int64_t first_scheduled_ns = -1;  // ns; -1: unknown (queue time then not reported)
};

// Per-request thresholds; a request meets the SLO when it completed and meets every one given.
// A TPOT threshold does not apply to requests with fewer than 2 output tokens (they have none).
struct Slo {
  std::optional<double> ttft_s;  // s
  std::optional<double> tpot_s;  // s per token
  std::optional<double> e2e_s;   // s
};

// Statistics of one latency, in s. All zero when there are no samples.
struct Stats {
  std::size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

// Nearest-rank percentile of sorted samples (see the definition above); p in [0, 100].
double percentile(std::span<const double> sorted, double p);
Stats stats_of(std::vector<double> samples);

struct SeriesPoint {
  double t_s = 0;               // s since the run started
  double batch_size = 0;        // sequences
  double kv_used_fraction = 0;  // of the KV blocks
};

struct Summary {
  std::size_t requests = 0;   // all given
  std::size_t completed = 0;
  std::size_t failed = 0;     // requests - completed
  double duration_s = 0;      // s
  std::uint64_t input_tokens = 0;   // tokens of completed requests
  std::uint64_t output_tokens = 0;  // tokens of completed requests
  double output_tokens_per_s = 0;   // tokens/s over duration_s
  double requests_per_s = 0;        // completed requests/s over duration_s

  Stats ttft_s;
  Stats tpot_s;
  Stats itl_s;
  Stats e2e_s;
  Stats queue_s;  // count 0 when no request carried first_scheduled_ns

  Slo slo;                          // as given
  std::size_t slo_met = 0;          // requests meeting every threshold
  double goodput_requests_per_s = 0;  // slo_met / duration_s
  double slo_attainment = 0;          // slo_met / requests, in [0, 1]

  // Time-integral of requests in flight (arrival to finish, completed requests) / duration.
  // Little's law: mean_concurrency == requests_per_s * e2e_s.mean (exactly, up to rounding).
  double mean_concurrency = 0;

  std::size_t steps = 0;
  double kv_used_mean = 0;   // fraction, time-weighted over steps (by end - start)
  double kv_used_max = 0;    // fraction
  double batch_size_mean = 0;  // sequences, mean over steps (each step counts once)
  std::uint32_t batch_size_max = 0;
  std::uint64_t preemptions = 0;  // sum over steps
  std::vector<SeriesPoint> series;  // for plots, at most SummaryOptions::max_series_points
};

struct SummaryOptions {
  Slo slo;
  // Bound on Summary::series: with more steps, the run is cut into this many equal time buckets
  // and each non-empty bucket gives one point (time-weighted means, t at the bucket's middle).
  std::size_t max_series_points = 500;
};

Summary summarize(std::span<const RequestTiming> requests,
                  std::span<const scheduler::StepRecord> steps,
                  const SummaryOptions& options = {});

// One request's metrics, for the per-request CSV. Absent values are -1.
struct RequestMetrics {
  double ttft_s = -1;
  double tpot_s = -1;
  double e2e_s = -1;
  double queue_s = -1;
  bool meets_slo = false;
};
RequestMetrics request_metrics(const RequestTiming& request, const Slo& slo);

}  // namespace actorlm::sim
