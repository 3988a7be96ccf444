#pragma once
// One simulated run: the real scheduler and block-manager actors with sim shards, on CAF's test
// coordinator (deterministic execution, virtual clock), fed a workload by a driver actor that is
// also every request's token sink. No CAF include here: the CLI and the planner include it.
//
// Time: every timestamp is ns of virtual time since the run started (the actor clock when the
// engine was spawned). The same config, workload and seed give the same result, bit for bit;
// only wall_seconds differs.
//
// With sim.clock = "wall" the same driver runs in real time against the engine `actorlm serve`
// builds for the config (serving::ServedModel): with [cluster] workers, the head of a cluster
// whose sim shards live in `actorlm worker` processes. Times are then ns of wall time since the
// start, and two runs differ as real runs do.

#include "actors/config/config.hpp"
#include "actors/scheduler/request.hpp"
#include "sim/model/catalogue.hpp"
#include "sim/model/memory_model.hpp"
#include "sim/metrics.hpp"
#include "sim/workload.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace actorlm::sim {

struct SimulationOptions {
  SummaryOptions summary;  // SLOs and the bound on the plotted series
  bool progress = false;   // a progress bar on stderr (the CLI asks when stderr is a TTY)
  std::string label;       // shown before the bar ("paged / 32in-128out")
  // Keep per-request timings and step records in the result (reports need them; the planner
  // and the benchmark only need the summary, and 20,000 requests' token times are ~20 MB).
  bool keep_records = true;
  // Spawn a shard actor for every rank, as production does (the scheduler then sends each step
  // to every rank). Off by default (SimBackend::rank0_factory: null handles above rank 0): sim
  // ranks above 0 do nothing, so the results are identical (tested) while a TP 8 run needs 7
  // fewer messages per step, each a copy of the Step: ~2.3x faster.
  bool spawn_idle_ranks = false;
};

struct SimulationResult {
  std::vector<RequestTiming> requests;       // in submission order (id = index + 1)
  std::vector<scheduler::StepRecord> steps;  // steps that ran sequences, times relative
  Summary summary;
  std::uint64_t refused = 0;                 // submissions answered queue_full, too_long or invalid
  std::uint64_t too_long = 0;                // of those, too_long (prompt + max_tokens never fits)
  std::uint64_t invalid = 0;                 // of those, invalid (Run::invalid)
  std::uint64_t unavailable = 0;             // submissions refused by a failed engine (wall clock)
  std::uint64_t errored = 0;                 // requests the engine ended with an error
  std::string first_error;                   // what the engine said of the first of them
  std::int64_t makespan_ns = 0;              // ns: start to the last step's end
  MemoryBreakdown memory;                    // the binding GPU
  std::vector<MemoryBreakdown> memory_per_gpu;
  std::string backend;                       // SimBackend::describe()
  double wall_seconds = 0;                   // s of wall time the run took, summary included
  double summary_seconds = 0;                // s of it spent in summarize() (percentile sorts)
  std::uint64_t events = 0;                  // actor activations the coordinator ran
};

// Runs `workload` (generated with `seed`) against the engine `cfg` describes (engine.backend is
// taken to be "sim" whatever it says), in the time sim.clock names; [cluster] workers need
// "wall" (std::invalid_argument otherwise). Throws std::invalid_argument with a user-facing message
// when the backend cannot be set up (unknown preset or hardware, model does not fit...).
SimulationResult simulate(const config::Config& cfg, const WorkloadSpec& workload,
                          std::uint64_t seed, const SimulationOptions& options = {});
// The same on a given catalogue (tests build faster hardware variants this way), always in
// virtual time: sim.clock and [cluster] are ignored.
SimulationResult simulate(const config::Config& cfg, const Catalogue& catalogue,
                          const WorkloadSpec& workload, std::uint64_t seed,
                          const SimulationOptions& options = {});

}  // namespace actorlm::sim
