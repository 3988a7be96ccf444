#pragma once
// Runs a scenario (every regime on every workload and sweep point) and writes its reports:
// the text table, CSV, JSON and SVG files of `actorlm simulate --out DIR`. Plain C++ (no CAF).

#include "sim/report.hpp"
#include "sim/scenario.hpp"
#include "sim/simulation.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace actorlm::sim {

// One workload's runs: points[p][r] is regime r at sweep point p (one point without a sweep).
struct WorkloadOutcome {
  std::string name;
  std::string description;   // to_string(WorkloadSpec)
  std::vector<double> rates;  // req/s of each point; empty without a sweep
  std::vector<std::vector<SimulationResult>> points;
};

struct ScenarioOutcome {
  std::vector<std::string> regimes;  // names, in file order
  std::vector<WorkloadOutcome> workloads;
  std::uint64_t seed = 0;
};

struct ScenarioRunOptions {
  std::uint64_t seed = 0;   // the workloads' seed
  bool progress = false;    // a progress bar per run on stderr
  std::function<void(const std::string&)> log;  // one line per run, when set
};

// Throws std::invalid_argument naming the regime when its backend cannot be set up (model
// does not fit...), or naming the workload when its max_tokens leaves a regime no room for a
// prompt (every request would be refused).
ScenarioOutcome run_scenario(const Scenario&, const ScenarioRunOptions&);

// The regimes of one sweep point, as report.hpp takes them (names: "paged", or "paged @ 2
// req/s" with a sweep).
std::vector<RegimeResult> regime_results(const ScenarioOutcome&, const WorkloadOutcome&,
                                         std::size_t point);
// Every point's rows, one table per workload, each under a heading line.
std::string scenario_table(const ScenarioOutcome&);

// The memory breakdown of every regime's GPUs, one line each ("paged: TP 4: weights ...").
// Throws like run_scenario when a regime's model does not fit.
std::string memory_report(const Scenario&);

// Writes DIR/<workload>/{summary.csv, requests.csv, series.csv, report.json, kv_usage.svg,
// batch_size.svg, latency_vs_load.svg and latency_vs_load_zoom.svg (with a sweep)} and
// DIR/memory.svg; returns the paths
// written. Throws std::runtime_error when a file cannot be written.
std::vector<std::string> write_reports(const ScenarioOutcome&, const Scenario&,
                                       const std::string& dir);

}  // namespace actorlm::sim
