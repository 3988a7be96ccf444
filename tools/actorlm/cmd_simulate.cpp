// `actorlm simulate FILE.toml`: a scenario's regimes side by side on its workloads, on the
// virtual clock (or the wall clock with sim.clock = "wall": then the head of a cluster when the
// scenario's [cluster] names workers); `actorlm plan FILE.toml`: the capacity search of its [plan] table.
// Tables go to stdout, progress and errors to stderr. Exit 0 ok, 1 bad input or a model that
// does not fit, 2 usage.
#include "sim/plan.hpp"
#include "sim/scenario.hpp"
#include "sim/scenario_run.hpp"
#include "tools/actorlm/commands.hpp"
#include "tools/bench/sim_bench.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <unistd.h>

namespace actorlm::tools {

namespace {

struct SimulateOptions {
  std::string file, out;
  std::optional<std::uint64_t> seed;
  bool memory = false;
  bool progress = false;
};

std::optional<sim::Scenario> load_or_report(const std::string& file) {
  auto parsed = sim::load_scenario(file);
  if (parsed.ok()) return std::move(parsed.scenario);
  for (const auto& e : parsed.errors) std::cerr << e.to_string() << "\n";
  std::cerr << file << ": " << parsed.errors.size() << " error" << (parsed.errors.size() == 1 ? "" : "s")
            << "\n";
  return std::nullopt;
}

int run_simulate(const SimulateOptions& o) {
  auto scenario = load_or_report(o.file);
  if (!scenario) return 1;
  try {
    if (o.memory) {
      std::cout << sim::memory_report(*scenario);
      return 0;
    }
    sim::ScenarioRunOptions ro;
    ro.seed = o.seed ? *o.seed : scenario->seed;
    ro.progress = o.progress || isatty(STDERR_FILENO);
    ro.log = [](const std::string& line) { spdlog::info("simulate: {}", line); };
    const auto outcome = sim::run_scenario(*scenario, ro);
    if (!scenario->name.empty()) std::cout << scenario->name << "\n\n";
    std::cout << sim::scenario_table(outcome);
    if (!o.out.empty()) {
      const auto files = sim::write_reports(outcome, *scenario, o.out);
      spdlog::info("simulate: wrote {} files under {}", files.size(), o.out);
    }
    return 0;
  } catch (const std::invalid_argument& e) {  // does not fit, unknown preset...
    std::cerr << o.file << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "simulate: " << e.what() << "\n";
    return 1;
  }
}

struct PlanCliOptions {
  std::string file, out;
  unsigned jobs = 0;
};

int run_plan_command(const PlanCliOptions& o) {
  auto scenario = load_or_report(o.file);
  if (!scenario) return 1;
  if (!scenario->plan) {
    std::cerr << o.file << ": no [plan] table (instances, tensor_parallel_degrees, regimes, ...)\n";
    return 1;
  }
  try {
    sim::PlanOptions po;
    po.jobs = o.jobs;
    const bool tty = isatty(STDERR_FILENO);
    po.progress = [tty](std::size_t done, std::size_t total) {
      if (tty) std::cerr << "\rplan: " << done << "/" << total << " configurations" << (done == total ? "\n" : "")
                         << std::flush;
    };
    const auto result = sim::run_plan(*scenario, po);
    spdlog::info("plan: {} configurations in {:.2f} s on {} threads", result.outcomes.size(),
                 result.wall_seconds, result.jobs);
    if (!scenario->name.empty()) std::cout << scenario->name << "\n";
    std::cout << sim::plan_report(result);
    if (!o.out.empty()) {
      std::filesystem::create_directories(o.out);
      const auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream f(std::filesystem::path(o.out) / name, std::ios::binary);
        f << text;
        if (!f) throw std::runtime_error("cannot write " + (std::filesystem::path(o.out) / name).string());
      };
      write("plan.csv", sim::plan_csv(result));
      write("plan.txt", sim::plan_report(result));
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "plan: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

void add_simulate_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand(
      "simulate", "Run a scenario's regimes on its workloads in virtual time (sim backend): table, "
                  "and CSV, JSON and SVG with --out. With sim.clock = \"wall\" the run takes real time, and "
                  "with [cluster] workers this process is the head of a cluster whose sim shards run in "
                  "`actorlm worker` processes");
  cmd->add_option("file", o->file, "Scenario TOML (configs/scenarios/*.toml)")->required();
  cmd->add_option("--out", o->out, "Directory for CSV, JSON and SVG reports");
  cmd->add_option("--seed", o->seed, "Workload seed (default: the scenario's [scenario] seed)");
  cmd->add_flag("--memory", o->memory, "Print each regime's per-GPU memory breakdown and exit");
  cmd->add_flag("--progress", o->progress, "Progress bar on stderr even when it is not a terminal");
  cmd->callback([o, &exit_code] { exit_code = run_simulate(*o); });
}

void add_plan_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PlanCliOptions>();
  auto* cmd = app.add_subcommand(
      "plan", "Capacity search over a scenario's [plan] grid: Pareto front of cost per million "
              "output tokens against latency, cheapest configuration meeting the SLOs");
  cmd->add_option("file", o->file, "Scenario TOML with a [plan] table")->required();
  cmd->add_option("--jobs", o->jobs, "Simulations run at once (default: every core)")
      ->check(CLI::Range(1u, 1024u));
  cmd->add_option("--out", o->out, "Directory for plan.csv and plan.txt");
  cmd->callback([o, &exit_code] { exit_code = run_plan_command(*o); });
}

void add_bench_sim_command(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<bench::SimBenchOptions>();
  auto* cmd = bench.add_subcommand(
      "sim", "Simulator speed: simulated requests per wall second (20,000 requests, Falcon-40B TP 8, "
             "paged, one thread) and the wall time of a 100-configuration plan on every core");
  cmd->add_option("--requests", o->requests, "Requests of the single run")->capture_default_str()
      ->check(CLI::Range(1u, 10'000'000u));
  cmd->add_option("--plan-requests", o->plan_requests, "Requests per plan configuration")
      ->capture_default_str()->check(CLI::Range(1u, 1'000'000u));
  cmd->add_option("--jobs", o->jobs, "Plan threads (default: every core)")->check(CLI::Range(1u, 1024u));
  cmd->callback([o, &exit_code] {
    auto opt = *o;
    opt.progress = [](const std::string& line) { spdlog::info("bench sim: {}", line); };
    try {
      const auto r = bench::run_sim_bench(opt);
      nlohmann::json j = {{"bench", "sim"},
                          {"requests", opt.requests},
                          {"sim_requests_per_s", r.sim_requests_per_s},
                          {"sim_requests_per_s_best", r.sim_requests_per_s_best},
                          {"sim_requests_per_s_all_ranks", r.sim_requests_per_s_all_ranks},
                          {"sim_requests_per_s_records", r.sim_requests_per_s_records},
                          {"run_wall_s", r.run_wall_s},
                          {"summary_s", r.summary_s},
                          {"simulated_s", r.simulated_s},
                          {"steps", r.steps},
                          {"actor_activations", r.events},
                          {"plan_seconds", r.plan_seconds},
                          {"plan_configurations", r.plan_configurations},
                          {"plan_skipped", r.plan_skipped},
                          {"plan_requests", opt.plan_requests},
                          {"plan_jobs", r.plan_jobs}};
      std::cout << j.dump() << std::endl;
      exit_code = 0;
    } catch (const std::exception& e) {
      spdlog::error("bench sim: {}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace actorlm::tools
