#pragma once
// The capacity search of `actorlm plan`: every configuration of a scenario's [plan] grid
// (instance x parallel degree x regime x batch settings) simulated on one workload, in
// parallel (one actor_system per run, `jobs` threads); configurations that do not fit are
// skipped and listed. Reports the Pareto front of cost per million output tokens against
// latency and the cheapest configuration meeting the SLOs. Plain C++ (no CAF).
//
// Cost: an instance with G GPUs runs G / degree independent replicas, so one replica costs
//   price_per_hour x degree / G   (USD/h; a replica over N nodes takes degree / N GPUs of each
//                                  of N instances: the same sum), and
//   cost per million output tokens = that / (output tokens/s x 3600) x 1e6.

#include "sim/metrics.hpp"
#include "sim/scenario.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace actorlm::sim {

struct PlanPoint {
  std::string instance;
  std::uint32_t degree = 1;   // GPUs per replica (a regime's stages x the tensor degree)
  std::uint32_t nodes = 1;    // instances it spans
  std::string regime;
  config::Config config;      // the regime's config with this point's settings
  std::string label() const;  // "g5.12xlarge TP 4 paged seqs 32 tokens 1024", "2 x g5.12xlarge TP 8 ..."
};

struct PlanOutcome {
  PlanPoint point;
  std::string skipped;              // non-empty: did not fit (the reason); nothing else is set
  Summary summary;
  double replica_price_per_hour = 0;  // USD/h
  double cost_per_million = 0;      // USD per 1e6 output tokens (infinite without output)
  double latency_s = 0;             // the plan's latency metric
  bool meets_slo = false;           // every request completed, each given p90 within its SLO
  double slo_ratio = 0;             // max over given SLOs of p90 / threshold (<= 1: met)
  double wall_seconds = 0;
};

struct PlanResult {
  std::vector<PlanOutcome> outcomes;           // grid order
  std::vector<std::size_t> pareto;             // non-dominated runs, by ascending cost
  std::optional<std::size_t> cheapest;         // cheapest that meets the SLOs
  std::optional<std::size_t> closest;          // when none does: the smallest slo_ratio
  std::string latency;                         // e2e_p90 | ttft_p90 | tpot_p90
  std::string workload;                        // its name and description
  Slo slo;
  unsigned jobs = 1;
  double wall_seconds = 0;
};

// The grid of a scenario's [plan] (std::invalid_argument when it has none): dynamic regimes
// take each batch_size, the others each max_num_seqs x max_num_batched_tokens.
std::vector<PlanPoint> plan_grid(const Scenario&);

struct PlanOptions {
  unsigned jobs = 0;  // threads; 0: std::thread::hardware_concurrency()
  std::function<void(std::size_t done, std::size_t total)> progress;  // from any thread, serialized
};

PlanResult run_plan(const Scenario&, const PlanOptions& = {});
// The same for any points and workload (the benchmark builds its own).
PlanResult run_plan(const std::vector<PlanPoint>&, const WorkloadSpec&, std::string workload_name,
                    const Slo&, std::uint64_t seed, const std::string& latency,
                    const PlanOptions& = {});

// Text: every run (cost, latency, SLO), the skipped ones with reasons, the Pareto front, and
// the answer. Deterministic (no wall times).
std::string plan_report(const PlanResult&);
// One row per configuration, for plotting the front.
std::string plan_csv(const PlanResult&);

}  // namespace actorlm::sim
