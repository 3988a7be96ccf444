// simulate(): the engine driven by one actor (sim_driver.hpp) that submits the workload's
// requests at their arrival times and is every request's token sink; on CAF's test coordinator
// (virtual time), or with sim.clock = "wall" in real time against the engine `actorlm serve`
// would build (its ranks on the [cluster] workers when there are some).
#include "sim/simulation.hpp"

#include "actors/engine/engine.hpp"
#include "actors/kv/block_manager_protocol.hpp"
#include "actors/serving/served_model.hpp"
#include "actors/shard/shard_protocol.hpp"
#include "sim/backend/sim_backend.hpp"
#include "sim/sim_driver.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

namespace actorlm::sim {

namespace {

using detail::Run;

struct SimSystemConfig : caf::actor_system_config {
  SimSystemConfig() {
    kv::add_block_manager_types(*this);
    shard::add_shard_types(*this);
    set("scheduler.policy", caf::atom("testing"));
    set("logger.file-verbosity", caf::atom("quiet"));
    set("logger.console-verbosity", caf::atom("quiet"));
  }
};

std::int64_t clock_ns(caf::actor_clock& clock) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock.now().time_since_epoch()).count();
}

// The run's generated workload, with a timing slot per request.
void prepare(Run& run, const WorkloadSpec& workload, std::uint64_t seed) {
  run.workload = generate(workload, seed);
  run.timings.resize(run.workload.size());
}

// What both clocks report once the driver is done: the summary and the backend's memory plan.
SimulationResult result_of(Run& run, const SimBackend& backend, const SimulationOptions& options,
                           std::chrono::steady_clock::time_point wall0) {
  SimulationResult out;
  std::sort(run.steps.begin(), run.steps.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (const auto& s : run.steps) out.makespan_ns = std::max(out.makespan_ns, s.end);
  const auto summary0 = std::chrono::steady_clock::now();
  out.summary = summarize(run.timings, run.steps, options.summary);
  out.summary_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - summary0).count();
  out.refused = run.refused;
  out.too_long = run.too_long;
  out.invalid = run.invalid;
  out.unavailable = run.unavailable;
  out.errored = run.errored;
  out.first_error = run.first_error;
  out.memory = backend.memory;
  out.memory_per_gpu = backend.memory_per_gpu;
  out.backend = backend.describe();
  if (options.keep_records) {
    out.requests = std::move(run.timings);
    out.steps = std::move(run.steps);
  }
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return out;
}

// Real time: the actor system, backend and engine as `actorlm serve` builds them (ServedModel),
// with the ranks on the cluster's workers when [cluster] names some. The caller's thread waits
// for the driver, drawing the progress bar.
SimulationResult simulate_wall(const config::Config& cfg, const WorkloadSpec& workload, std::uint64_t seed,
                               const SimulationOptions& options) {
  const auto wall0 = std::chrono::steady_clock::now();
  const SimBackend backend = load_sim_backend(cfg);  // the memory plan and description (no actors)
  Run run;
  prepare(run, workload, seed);

  caf::actor_system_config sys_cfg;
  serving::configure_actor_system(sys_cfg, cfg);
  caf::actor_system sys{sys_cfg};
  {
    serving::ServedModel model(sys, cfg);
    const std::int64_t t0 = clock_ns(sys.clock());
    const auto drv = detail::spawn_driver(sys, &run, model.engine().actors().scheduler, t0, model.vocab_size(), workload);
    const auto elapsed_s = [&] { return double(clock_ns(sys.clock()) - t0) * 1e-9; };
    bool printed = false;
    while (!run.drained && !run.stopped) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (options.progress && std::chrono::steady_clock::now() - wall0 > std::chrono::milliseconds(500)) {
        printed = true;
        detail::print_progress(options.label, run.done, run.workload.size(), elapsed_s(), true);
      }
    }
    if (printed) {
      detail::print_progress(options.label, run.done, run.workload.size(), elapsed_s(), true);
      std::fputc('\n', stderr);
    }
    caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
  }  // the engine stops, and with [cluster] the workers are let go
  if (run.stopped) throw std::runtime_error("simulate: the run stopped before its end: " + run.stop_reason);
  SimulationResult out = result_of(run, backend, options, wall0);
  out.backend += cfg.cluster.workers.empty() ? " (wall-clock time)" : " (ranks placed by [cluster] workers, wall-clock time)";
  return out;
}

}  // namespace

SimulationResult simulate(const config::Config& cfg, const WorkloadSpec& workload,
                          std::uint64_t seed, const SimulationOptions& options) {
  config::Config c = cfg;
  c.engine.backend = config::Backend::sim;
  if (c.sim.clock == config::SimClock::wall) return simulate_wall(c, workload, seed, options);
  if (!c.cluster.workers.empty())
    throw std::invalid_argument("sim shards on cluster workers run in wall-clock time: set sim.clock = \"wall\"");
  return simulate(c, catalogue_for(c), workload, seed, options);
}

SimulationResult simulate(const config::Config& cfg_in, const Catalogue& catalogue,
                          const WorkloadSpec& workload, std::uint64_t seed,
                          const SimulationOptions& options) {
  const auto wall0 = std::chrono::steady_clock::now();
  config::Config cfg = cfg_in;
  cfg.engine.backend = config::Backend::sim;
  const SimBackend backend = load_sim_backend(cfg, catalogue);

  Run run;
  prepare(run, workload, seed);

  SimSystemConfig sys_cfg;
  caf::actor_system sys{sys_cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto& clock = sched.clock();
  const std::int64_t t0 = clock_ns(clock);

  // The driver times every token it receives: the scheduler's own token times are not needed.
  const engine::EngineActors engine = engine::spawn_engine(
      sys, cfg, backend.capacity, options.spawn_idle_ranks ? backend.factory : backend.rank0_factory, {},
      engine::EngineOptions{.record_token_times = false});
  const auto drv = detail::spawn_driver(sys, &run, engine.scheduler, t0, backend.capacity.vocab_size, workload);

  // The bar appears once a run has taken 0.5 s of wall time: short runs print nothing.
  const auto virtual_s = [&] { return double(clock_ns(clock) - t0) * 1e-9; };
  auto last_print = wall0 + std::chrono::milliseconds(300);
  bool printed = false;
  std::uint64_t events = 0;
  for (;;) {
    while (sched.try_run_once()) {
      if ((++events & 0xFFFF) == 0 && options.progress) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_print > std::chrono::milliseconds(200)) {
          last_print = now;
          printed = true;
          detail::print_progress(options.label, run.done, run.workload.size(), virtual_s());
        }
      }
    }
    if (!clock.has_pending_timeout()) break;
    const auto next = clock.schedule().begin()->first;
    clock.advance_time(next - clock.now());
  }
  if (printed) {
    detail::print_progress(options.label, run.done, run.workload.size(), virtual_s());
    std::fputc('\n', stderr);
  }
  engine::stop_engine(engine);
  caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
  sched.run();  // lets the actors see their exit messages before the system shuts down
  if (run.stopped) throw std::runtime_error("simulate: the run stopped before its end: " + run.stop_reason);
  if (run.done == run.workload.size() && !run.drained)
    throw std::logic_error("simulate: the scheduler's records were not collected");  // a bug

  SimulationResult out = result_of(run, backend, options, wall0);
  out.events = events;
  return out;
}

}  // namespace actorlm::sim
