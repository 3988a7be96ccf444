#pragma once
// A simulation scenario: one TOML file holding a base engine config (the daemon's [engine],
// [cache], [scheduler], [model], [sim] sections), regimes that override it, workloads, SLOs, a
// seed and, for `actorlm plan`, a capacity-search grid. Plain C++ (no CAF).
//
//   [scenario]                       name, description, seed (>= 0, default 0)
//   [engine] [cache] [scheduler] [model] [sim] [server] [cluster]   as in configs/default.toml
//   [[regimes]]                      name = "paged", then overrides as dotted keys:
//   engine.batching = "paged"        any key of the config sections above
//   [workload] or [[workloads]]      a workload table (sim/workload_toml.cpp), with `name`
//                                    ([[workloads]]: required) and `load_sweep = [req/s, ...]`:
//                                    one run per rate, replacing a poisson/gamma arrival's rate
//   [slo]                            ttft_s, tpot_s, e2e_s (s, > 0; each optional)
//   [plan]                           see PlanSpec
//
// Every error names the file, line, column and dotted key ("regimes[1].scheduler.batch_size"),
// as config::ConfigError does. Overrides are checked by config::parse_config on the merged
// tables, and each error is located at the key that caused it in this file.

#include "actors/config/config.hpp"
#include "sim/metrics.hpp"
#include "sim/workload.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::sim {

struct Regime {
  std::string name;
  config::Config config;  // the base with this regime's overrides; engine.backend forced to sim
};

struct ScenarioWorkload {
  std::string name;
  WorkloadSpec spec;
  std::vector<double> load_sweep;  // req/s, ascending as written; empty: the spec's arrival as is
};
// The spec of one sweep point: the arrival's rate replaced by `rate` (poisson or gamma).
WorkloadSpec at_rate(const WorkloadSpec& spec, double rate);

// The capacity search's grid: every combination is one simulation. Lists left empty keep the
// regime's value. Instances with more GPUs than the parallel degree are taken to run
// gpus / degree independent replicas, so one replica pays degree / gpus of the hourly price.
struct PlanSpec {
  std::vector<std::string> instances;                  // catalogue keys, >= 1
  std::vector<std::uint32_t> tensor_parallel_degrees;  // GPUs per replica; more than the
                                                       // nodes' GPUs: skipped
  // Instances one replica spans (sim.nodes); empty: the regime's. A count above 1 is tried only
  // with degrees that need it (more GPUs than one node fewer has) and spread equally.
  std::vector<std::uint32_t> nodes;
  std::vector<std::string> regimes;                    // names of [[regimes]]; empty: all
  std::vector<std::uint32_t> max_num_seqs;
  std::vector<std::uint32_t> max_num_batched_tokens;
  std::vector<std::uint32_t> batch_size;               // applied to dynamic regimes only
  std::string workload;                                // a workload's name; empty: the first
  std::optional<std::uint32_t> requests;               // replaces the workload's request count
  std::string latency = "e2e_p90";  // the Pareto front's latency axis: e2e_p90 | ttft_p90 | tpot_p90
};

struct Scenario {
  std::string file;
  std::string name;
  std::string description;
  std::uint64_t seed = 0;
  config::Config base;
  std::vector<Regime> regimes;              // >= 1 (none written: one named "default", the base)
  std::vector<ScenarioWorkload> workloads;  // >= 1
  Slo slo;
  std::optional<PlanSpec> plan;
};

struct ScenarioParse {
  Scenario scenario;                        // meaningful only when ok()
  std::vector<config::ConfigError> errors;  // every problem found, in file order
  bool ok() const { return errors.empty(); }
};

// Parses scenario text; `file` names it in errors and anchors relative trace paths.
ScenarioParse parse_scenario(std::string_view text, std::string_view file);
// Reads a file; a missing or unreadable file is one error naming it.
ScenarioParse load_scenario(const std::string& path);

}  // namespace actorlm::sim
