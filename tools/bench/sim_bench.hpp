#pragma once
// `actorlm bench sim`: how fast the simulator runs. sim_requests_per_s: simulated requests
// per wall second for 20,000 requests of 32 input / 128 output tokens, Falcon-40B at TP 8 on
// g5.48xlarge, paged regime (DJL's rolling batch of 32, 1,024 prefill tokens), 32 closed-loop
// clients, on one simulation thread (median of 3 runs). plan_seconds: wall time of a
// 100-configuration capacity search (5 instance/degree pairs x 2 regimes x 5 max_num_seqs x
// 2 token budgets) of 1,000 requests each, on every core.

#include <cstdint>
#include <functional>
#include <string>

namespace actorlm::bench {

struct SimBenchOptions {
  std::uint32_t requests = 20000;       // the single-run measurement
  std::uint32_t plan_requests = 1000;   // per plan configuration
  unsigned jobs = 0;                    // plan threads; 0: every core
  std::function<void(const std::string&)> progress;
};

struct SimBenchResult {
  double sim_requests_per_s = 0;        // median of 3 runs, rank 0 only spawned (the default)
  double sim_requests_per_s_best = 0;   // the best of the 3
  double sim_requests_per_s_all_ranks = 0;  // every rank an actor, as in production
  double sim_requests_per_s_records = 0;    // one run keeping per-request records (as simulate does)
  double run_wall_s = 0;                // of the best run
  double summary_s = 0;                 // of run_wall_s: summarize() (sorting 2.5 M latencies)
  double simulated_s = 0;               // virtual time of the 20,000-request run
  std::uint64_t steps = 0;
  std::uint64_t events = 0;             // actor activations
  double plan_seconds = 0;
  std::uint32_t plan_configurations = 0;
  std::uint32_t plan_skipped = 0;
  unsigned plan_jobs = 0;
};

SimBenchResult run_sim_bench(const SimBenchOptions&);

}  // namespace actorlm::bench
