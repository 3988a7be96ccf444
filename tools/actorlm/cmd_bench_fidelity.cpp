// `actorlm bench fidelity`: the simulator against the real cpu engine on this machine
// (tools/bench/fidelity.hpp). Progress on stderr; the table on stdout, then one JSON line with
// the figures (mean and max |relative error| of throughput and p90 E2E, as fractions).
#include "tools/actorlm/commands.hpp"
#include "tools/bench/fidelity.hpp"
#include "tools/bench/fidelity_json.hpp"
#include "tools/bench/fidelity_resimulate.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

namespace actorlm::tools {

namespace {

std::string percent(double e) { return fmt::format("{:+.1f}%", 100 * e); }

// What the measurement allows (tools/bench/fidelity_floor.hpp), and whether the run can show the
// goal at all (bench::fidelity_goal_mean, bench::fidelity_goal_max).
std::string twin_floor_line(const bench::FidelityReport& r) {
  if (r.twin_pairs == 0) return {};
  const double mean = std::max(r.floor_mean_abs_error_throughput, r.floor_mean_abs_error_p90_e2e);
  const double max = std::max(r.floor_max_abs_error_throughput, r.floor_max_abs_error_p90_e2e);
  const bool beyond = mean > bench::fidelity_goal_mean || max > bench::fidelity_goal_max;
  return fmt::format("the measurement's floor: {} continuous/paged twin pairs run the same steps and are simulated "
                     "alike, yet measured apart; no prediction they share comes closer than mean |error| throughput "
                     "{:.1f} %, p90 E2E {:.1f} %; max {:.1f} %, {:.1f} %{}\n",
                     r.twin_pairs, 100 * r.floor_mean_abs_error_throughput, 100 * r.floor_mean_abs_error_p90_e2e,
                     100 * r.floor_max_abs_error_throughput, 100 * r.floor_max_abs_error_p90_e2e,
                     beyond ? ": above the goal, which this run cannot show whatever the model" : "");
}

// Prints the report (the table, the figures, where the time went, the JSON line last) and, with
// `out_dir`, writes fidelity.json and fidelity.txt there.
void print_report(const bench::FidelityReport& r, const bench::FidelityOptions& o, const std::string& out_dir,
                  const std::string& heading) {
  using M = bench::FidelityMetrics;
  std::string table = fmt::format("{:<18} {:<10} {:>7} | {:>21} | {:>21} | {:>21} | {:>21} | {:>21}\n", "workload",
                                  "regime", "clients", "tok/s meas/sim err", "TTFT p50 s", "TTFT p90 s", "E2E p50 s",
                                  "E2E p90 s");
  // Where the time went: the steps and the time between them, measured and simulated ("-" where
  // the server's counters could not be read).
  std::string steps = fmt::format("{:<18} {:<10} {:>7} | {:>13} | {:>21} | {:>15} | {:>10} | {:>12}\n", "workload",
                                  "regime", "clients", "steps", "ms per step", "idle s", "engine own", "client CPU");
  for (const auto& c : r.cases) {
    const auto& m = c.measured;
    const auto& s = c.simulated;
    const auto value = [](bool known, double v, int digits) {
      return known ? fmt::format("{:.{}f}", v, digits) : std::string("-");
    };
    const bool mk = m.steps > 0, sk = s.steps > 0;
    steps += fmt::format("{:<18} {:<10} {:>7} | {:>6} {:>6} | {:>6} {:>6} {:>7} | {:>7} {:>7} | {:>7} us | {:>7} us/t\n",
                         c.c.workload, config::to_string(c.c.regime), c.c.clients, value(mk, m.steps, 0),
                         value(sk, s.steps, 0), value(mk, 1e3 * m.step_s, 2),
                         value(sk, 1e3 * s.step_s, 2), mk && sk && m.step_s > 0 ? percent(s.step_s / m.step_s - 1) : "-",
                         value(mk, m.idle_s, 3), value(sk, s.idle_s, 3),
                         value(mk, 1e6 * m.serving_step_overhead, 0),
                         value(m.client_cpu_per_token >= 0, 1e6 * m.client_cpu_per_token, 1));
    const auto cell = [&](double M::*field, int digits) {
      return fmt::format("{:.{}f} {:.{}f} {:>7}", m.*field, digits, s.*field, digits, percent(c.error(field)));
    };
    table += fmt::format("{:<18} {:<10} {:>7} | {:>21} | {:>21} | {:>21} | {:>21} | {:>21}\n", c.c.workload,
                         config::to_string(c.c.regime), c.c.clients, cell(&M::throughput, 1), cell(&M::ttft_p50, 3),
                         cell(&M::ttft_p90, 3), cell(&M::e2e_p50, 3), cell(&M::e2e_p90, 3));
  }
  std::cout << heading << "\n"
            << table
            << fmt::format("mean |error|: throughput {:.1f} %, p90 E2E {:.1f} %, p90 TTFT {:.1f} %; max: {:.1f} %, "
                           "{:.1f} %, {:.1f} %\n",
                           100 * r.mean_abs_error_throughput, 100 * r.mean_abs_error_p90_e2e,
                           100 * r.mean_abs_error_p90_ttft, 100 * r.max_abs_error_throughput,
                           100 * r.max_abs_error_p90_e2e, 100 * r.max_abs_error_p90_ttft)
            << fmt::format("machine drift over the run: {:+.1f} % ({})", 100 * r.machine_drift,
                           r.interleaved ? "the calibration grid's step time, its last pass after the cases against its "
                                           "first before them; the passes' medians were fitted"
                                         : "the quick grid's step time, end against start")
            << (r.drift_corrected
                    ? fmt::format("; cases simulated with step times x {:.3f} to {:.3f} for the drift at their time; "
                                  "without: mean |error| throughput {:.1f} %, p90 E2E {:.1f} %; max {:.1f} %, {:.1f} %",
                                  r.slowdown_min, r.slowdown_max, 100 * r.mean_abs_error_throughput_uncorrected,
                                  100 * r.mean_abs_error_p90_e2e_uncorrected, 100 * r.max_abs_error_throughput_uncorrected,
                                  100 * r.max_abs_error_p90_e2e_uncorrected)
                    : std::string())
            << "\n"
            << (r.calibration_pass_spread > 0
                    ? fmt::format("the calibration's passes spread {:.1f} % per shape (median){}\n",
                                  100 * r.calibration_pass_spread,
                                  r.calibration_pass_spread > bench::noisy_pass_spread
                                      ? ": the machine's speed moved by more than +-5 %, the goal's mean error"
                                      : "")
                    : std::string())
            << twin_floor_line(r)
            << fmt::format("the engine's own time per step under serving: {:.0f} us (median over the cases; the "
                           "calibration's in-process engine: {:.0f} us)\n",
                           1e6 * r.serving_step_overhead, 1e6 * r.calibrated_step_overhead)
            << "where the time went (measured / simulated: steps, mean step time, time with no step running; measured: "
               "the engine's own time per step, the load client's CPU per output token):\n"
            << steps;
  const nlohmann::json j = bench::fidelity_summary_json(r);
  if (!out_dir.empty()) {
    std::ofstream(out_dir + "/fidelity.json") << bench::fidelity_json(r, o).dump(2) << "\n";
    std::ofstream(out_dir + "/fidelity.txt") << table << "\n" << steps;
  }
  std::cout << j.dump() << std::endl;
}

int run(bench::FidelityOptions o, const std::string& out_dir) {
  o.progress = [](const std::string& line) { spdlog::info("bench fidelity: {}", line); };
  if (!out_dir.empty()) o.work_dir = out_dir;
  const bench::FidelityReport r = bench::run_fidelity(o);
  print_report(r, o, out_dir,
               "simulated on " + r.hardware_key + " (calibrated on this machine), measured through actorlm serve");
  return 0;
}

// --resimulate: the saved run's cases simulated again; with --out, its files written there (a
// directory of their own: DIR's are the run's record).
int resimulate(const std::string& dir, const bench::FidelityOptions& given, bool no_fit_overlap,
               const std::string& out_dir) {
  bench::ResimulateOptions ro;
  ro.dir = dir;
  ro.hardware_catalogue = given.hardware_catalogue;
  ro.hardware_key = given.hardware_key;
  if (given.fit_overlap) ro.fit_overlap = true;
  if (no_fit_overlap) ro.fit_overlap = false;
  ro.progress = [](const std::string& line) { spdlog::info("bench fidelity: {}", line); };
  if (!out_dir.empty() && std::filesystem::exists(out_dir) &&
      std::filesystem::equivalent(std::filesystem::path(out_dir), std::filesystem::path(dir))) {
    spdlog::error("bench fidelity: --out {} is the run being re-simulated; its record stays as it is: give another "
                  "directory", out_dir);
    return 1;
  }
  const bench::Resimulation re = bench::resimulate_fidelity(ro);
  if (!out_dir.empty()) {
    std::filesystem::create_directories(out_dir);
    std::ofstream(out_dir + "/hardware.toml") << re.report.calibration_toml;
  }
  print_report(re.report, re.options, out_dir,
               "re-simulated the measurements of " + dir + " on " + re.hardware_source +
                   "; measured then through actorlm serve, nothing measured now");
  return 0;
}

}  // namespace

void add_bench_fidelity_command(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<bench::FidelityOptions>();
  auto out = std::make_shared<std::string>();
  auto* cmd = bench.add_subcommand(
      "fidelity",
      "The simulator against the real engine on this machine: for 3 workloads x the continuous and paged regimes x "
      "2 closed-loop loads run `actorlm serve` (cpu, default model) driven by bench client's load generator, between "
      "the passes of a calibration of the cost model (cpu backend, TP 1), simulate the same config and workload on "
      "the calibrated hardware, and print measured and simulated throughput, p50/p90 TTFT and E2E with their "
      "relative errors, then where each case's time went (steps, their mean time, time with no step running)");
  auto* model = cmd->add_option("--model", o->model_path, "GGUF file (default: the default model, which the simulated preset describes)");
  auto* hardware = cmd->add_option("--hardware", o->hardware_catalogue,
                                   "A catalogue written by `actorlm calibrate` (skips calibrating; with --resimulate, "
                                   "simulates on it)");
  cmd->add_option("--hardware-key", o->hardware_key, "Its entry (default: the first)")->needs(hardware);
  auto* seqs = cmd->add_option("--max-num-seqs", o->max_num_seqs, "The full batch; the low load is a quarter of it")
      ->capture_default_str()->check(CLI::Range(4u, 256u));
  auto* blocks = cmd->add_option("--kv-blocks", o->kv_blocks,
                  "KV blocks of both runs (cache.num_gpu_blocks_override); at least 140: the mix's longest "
                  "prompt (1,024 tokens) asking for max_tokens 1,024, beside the 1 % watermark")
      ->capture_default_str()->check(CLI::Range(140u, 1u << 20));
  auto* seed = cmd->add_option("--seed", o->seed, "Workload and prompt seed")->capture_default_str();
  auto* rounds = cmd->add_option("--rounds", o->rounds, "Measurements of every case, in rounds over all cases; each figure is their median (with the "
                  "passes interleaved, the calibration then makes a pass between each two rounds: rounds + 1 "
                  "passes, 3 at least, 2 with --quick)")
      ->capture_default_str()->check(CLI::Range(1u, 20u));
  cmd->add_option("--out", *out, "Directory for the server configs and logs, fidelity.json and fidelity.txt");
  auto* quick = cmd->add_flag("--quick", o->quick, "A ten-shape calibration and one small case: proves the path in seconds");
  auto* no_interleave = cmd->add_flag("!--no-interleave", o->interleave,
                "Calibrate first, every pass before the cases (by default the passes run before, between and after "
                "them, so that their medians describe the machine over the run)");
  auto* drift = cmd->add_flag("--drift-correction", o->drift_correction,
                "A speed probe after every measured case, and each case simulated on the calibration slowed by the "
                "machine's drift at its time (the uncorrected errors beside)");
  auto* fit_overlap = cmd->add_flag("--fit-overlap", o->fit_overlap,
                                    "The calibration fits memory_compute_overlap (calibrate --fit-overlap); with "
                                    "--resimulate, the refit does (without this or --no-fit-overlap, it fits as the "
                                    "run did)");
  auto resimulate_dir = std::make_shared<std::string>();
  auto* resimulate_option = cmd->add_option("--resimulate", *resimulate_dir,
                  "Measure nothing: simulate again the cases an earlier run measured (its --out DIR), on its "
                  "calibration refitted by this build (or --hardware's catalogue), and print the same report; "
                  "--out then names a new directory for its files")
      ->check(CLI::ExistingDirectory)
      ->excludes(model)->excludes(seqs)->excludes(blocks)->excludes(seed)->excludes(rounds)->excludes(quick)
      ->excludes(no_interleave)->excludes(drift);
  auto no_fit_overlap = std::make_shared<bool>(false);
  cmd->add_flag("--no-fit-overlap", *no_fit_overlap,
                "With --resimulate: the refit keeps memory_compute_overlap at 0, the sum (calibrate's default), "
                "whatever the run did")
      ->needs(resimulate_option)
      ->excludes(fit_overlap);
  cmd->callback([o, out, resimulate_dir, no_fit_overlap, &exit_code] {
    try {
      exit_code = resimulate_dir->empty() ? run(*o, *out)
                                          : resimulate(*resimulate_dir, *o, *no_fit_overlap, *out);
    } catch (const std::exception& e) {
      spdlog::error("bench fidelity: {}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace actorlm::tools
