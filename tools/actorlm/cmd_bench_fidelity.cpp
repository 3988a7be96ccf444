// `actorlm bench fidelity`: the simulator against the real cpu engine on this machine
// (tools/bench/fidelity.hpp). Progress on stderr; the table on stdout, then one JSON line with
// the figures (mean and max |relative error| of throughput and p90 E2E, as fractions).
#include "tools/actorlm/commands.hpp"
#include "tools/bench/fidelity.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>

namespace actorlm::tools {

namespace {

nlohmann::json metrics_json(const bench::FidelityMetrics& m) {
  nlohmann::json j = {{"throughput", m.throughput}, {"ttft_p50", m.ttft_p50}, {"ttft_p90", m.ttft_p90},
                      {"e2e_p50", m.e2e_p50},       {"e2e_p90", m.e2e_p90},   {"completed", m.completed}};
  if (m.steps > 0) {
    j["steps"] = m.steps;
    j["step_ms"] = 1e3 * m.step_s;
    j["idle_s"] = m.idle_s;
  }
  if (m.serving_step_overhead >= 0) j["engine_own_us_per_step"] = 1e6 * m.serving_step_overhead;
  if (m.client_cpu_per_token >= 0) j["client_cpu_us_per_token"] = 1e6 * m.client_cpu_per_token;
  return j;
}

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

int run(bench::FidelityOptions o, const std::string& out_dir) {
  o.progress = [](const std::string& line) { spdlog::info("bench fidelity: {}", line); };
  if (!out_dir.empty()) o.work_dir = out_dir;
  const bench::FidelityReport r = bench::run_fidelity(o);
  using M = bench::FidelityMetrics;
  std::string table = fmt::format("{:<18} {:<10} {:>7} | {:>21} | {:>21} | {:>21} | {:>21} | {:>21}\n", "workload",
                                  "regime", "clients", "tok/s meas/sim err", "TTFT p50 s", "TTFT p90 s", "E2E p50 s",
                                  "E2E p90 s");
  // Where the time went: the steps and the time between them, measured and simulated ("-" where
  // the server's counters could not be read).
  std::string steps = fmt::format("{:<18} {:<10} {:>7} | {:>13} | {:>21} | {:>15} | {:>10} | {:>12}\n", "workload",
                                  "regime", "clients", "steps", "ms per step", "idle s", "engine own", "client CPU");
  nlohmann::json cases = nlohmann::json::array();
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
    cases.push_back({{"workload", c.c.workload},
                     {"regime", config::to_string(c.c.regime)},
                     {"clients", c.c.clients},
                     {"requests", c.c.spec.requests},
                     {"measured", metrics_json(c.measured)},
                     {"rounds", [&] {
                        nlohmann::json a = nlohmann::json::array();
                        for (const auto& m : c.rounds) a.push_back(metrics_json(m));
                        return a;
                      }()},
                     {"simulated", metrics_json(c.simulated)},
                     {"simulated_uncorrected", metrics_json(c.simulated_uncorrected)},
                     {"slowdown", c.slowdown},
                     {"error_throughput", c.error(&M::throughput)},
                     {"error_p90_ttft", c.error(&M::ttft_p90)},
                     {"error_p90_e2e", c.error(&M::e2e_p90)}});
  }
  std::cout << "simulated on " << r.hardware_key << " (calibrated on this machine), measured through actorlm serve\n"
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
  const nlohmann::json j = {{"bench", "fidelity"},
                            {"hardware", r.hardware_key},
                            {"cases", r.cases.size()},
                            {"mean_abs_error_throughput", r.mean_abs_error_throughput},
                            {"mean_abs_error_p90_e2e", r.mean_abs_error_p90_e2e},
                            {"max_abs_error_throughput", r.max_abs_error_throughput},
                            {"max_abs_error_p90_e2e", r.max_abs_error_p90_e2e},
                            {"mean_abs_error_p90_ttft", r.mean_abs_error_p90_ttft},
                            {"max_abs_error_p90_ttft", r.max_abs_error_p90_ttft},
                            {"machine_drift", r.machine_drift},
                            {"calibration_interleaved", r.interleaved},
                            {"calibration_pass_spread", r.calibration_pass_spread},
                            {"drift_corrected", r.drift_corrected},
                            {"slowdown_min", r.slowdown_min},
                            {"slowdown_max", r.slowdown_max},
                            {"mean_abs_error_throughput_uncorrected", r.mean_abs_error_throughput_uncorrected},
                            {"mean_abs_error_p90_e2e_uncorrected", r.mean_abs_error_p90_e2e_uncorrected},
                            {"max_abs_error_throughput_uncorrected", r.max_abs_error_throughput_uncorrected},
                            {"max_abs_error_p90_e2e_uncorrected", r.max_abs_error_p90_e2e_uncorrected},
                            {"serving_step_overhead_us", 1e6 * r.serving_step_overhead},
                            {"calibrated_step_overhead_us", 1e6 * r.calibrated_step_overhead},
                            {"twin_pairs", r.twin_pairs},
                            {"floor_mean_abs_error_throughput", r.floor_mean_abs_error_throughput},
                            {"floor_max_abs_error_throughput", r.floor_max_abs_error_throughput},
                            {"floor_mean_abs_error_p90_e2e", r.floor_mean_abs_error_p90_e2e},
                            {"floor_max_abs_error_p90_e2e", r.floor_max_abs_error_p90_e2e}};
  if (!out_dir.empty()) {
    std::ofstream(out_dir + "/fidelity.json") << nlohmann::json{{"summary", j}, {"cases", cases}}.dump(2) << "\n";
    std::ofstream(out_dir + "/fidelity.txt") << table << "\n" << steps;
  }
  std::cout << j.dump() << std::endl;
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
  cmd->add_option("--model", o->model_path, "GGUF file (default: the default model, which the simulated preset describes)");
  cmd->add_option("--hardware", o->hardware_catalogue, "A catalogue written by `actorlm calibrate` (skips calibrating)");
  cmd->add_option("--hardware-key", o->hardware_key, "Its entry (default: the first)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "The full batch; the low load is a quarter of it")
      ->capture_default_str()->check(CLI::Range(4u, 256u));
  cmd->add_option("--kv-blocks", o->kv_blocks,
                  "KV blocks of both runs (cache.num_gpu_blocks_override); at least 140: the mix's longest "
                  "prompt (1,024 tokens) asking for max_tokens 1,024, beside the 1 % watermark")
      ->capture_default_str()->check(CLI::Range(140u, 1u << 20));
  cmd->add_option("--seed", o->seed, "Workload and prompt seed")->capture_default_str();
  cmd->add_option("--rounds", o->rounds, "Measurements of every case, in rounds over all cases; each figure is their median (with the "
                  "passes interleaved, the calibration then makes a pass between each two rounds: rounds + 1 "
                  "passes, 3 at least, 2 with --quick)")
      ->capture_default_str()->check(CLI::Range(1u, 20u));
  cmd->add_option("--out", *out, "Directory for the server configs and logs, fidelity.json and fidelity.txt");
  cmd->add_flag("--quick", o->quick, "A nine-shape calibration and one small case: proves the path in seconds");
  cmd->add_flag("!--no-interleave", o->interleave,
                "Calibrate first, every pass before the cases (by default the passes run before, between and after "
                "them, so that their medians describe the machine over the run)");
  cmd->add_flag("--drift-correction", o->drift_correction,
                "A speed probe after every measured case, and each case simulated on the calibration slowed by the "
                "machine's drift at its time (the uncorrected errors beside)");
  cmd->callback([o, out, &exit_code] {
    try {
      exit_code = run(*o, *out);
    } catch (const std::exception& e) {
      spdlog::error("bench fidelity: {}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace actorlm::tools
