// `actorlm calibrate`: the cpu backend's step times on this machine, the cost model fitted to
// them, and a hardware catalogue for the simulator (tools/bench/calibrate.hpp). Progress on
// stderr, the fit's table on stdout, one JSON line last.
#include "tools/actorlm/commands.hpp"
#include "tools/bench/calibrate.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <memory>

namespace actorlm::tools {

namespace {

struct CalibrateArgs {
  std::string config;
  std::string model;
  std::vector<std::uint32_t> tp;  // empty: 1, and 2 where the model splits over 2
  std::uint32_t repeats = 3;
  std::uint32_t passes = 3;
  std::string name = "cpu-local";
  std::string out = "calibrated-hardware.toml";
  bool quick = false;
  bool fit_overlap = false;
};

nlohmann::json to_json(const bench::CalibrationFit& f) {
  const sim::Hardware& h = f.hardware;
  return {{"tp", f.tp},
          {"key", h.key},
          {"threads_per_rank", f.threads_per_rank},
          {"shapes", f.points.size()},
          {"rms_relative_error", f.rms_relative_error},
          {"max_relative_error", f.max_relative_error},
          {"median_pass_spread", f.median_pass_spread},
          {"small_gemm_tflops", h.small_gemm_flops / 1e12},
          {"fp16_tflops", h.flops / 1e12},
          {"gemm_dequant_gweights_per_s", h.gemm_weight_rate / 1e9},
          {"attention_tflops", h.attention_flops / 1e12},
          {"prefill_attention_tflops", h.prefill_attention_flops / 1e12},
          {"kernel_launch_us", h.kernel_launch * 1e6},
          {"large_batch_gemm_rows", h.large_batch_rows},
          {"large_batch_gemm_tflops", h.large_batch_flops / 1e12},
          {"memory_compute_overlap", h.memory_overlap},
          {"link_bandwidth_gbps", f.tp > 1 ? h.link_bandwidth / 1e9 : 0.0}};
}

int run(const CalibrateArgs& a) {
  auto cfg = load_config_or_report(a.config);
  if (!cfg) return 1;
  bench::CalibrateOptions o;
  o.config = *cfg;
  if (!a.model.empty()) o.config.model.path = a.model;
  o.tp = a.tp;
  o.repeats = a.repeats;
  o.passes = a.passes;
  o.name = a.name;
  o.fit_overlap = a.fit_overlap;
  if (a.quick) o.grid = bench::quick_calibration_grid();
  o.progress = [](const std::string& line) { spdlog::info("calibrate: {}", line); };
  const bench::Calibration c = bench::run_calibration(o);
  const std::string toml = bench::hardware_catalogue_toml(c);
  {
    std::ofstream f(a.out, std::ios::binary);
    f << toml;
    if (!f) {
      spdlog::error("calibrate: cannot write {}", a.out);
      return 1;
    }
  }
  nlohmann::json j = {{"bench", "calibrate"}, {"model", c.model_path}, {"bytes_per_weight", c.model.weight_bytes},
                      {"read_bandwidth_gb_s", c.read_bytes_per_s / 1e9},
                      {"weight_sized_read_bandwidth_gb_s", c.weight_sized_read_bytes_per_s / 1e9}, {"catalogue", a.out}};
  for (const auto& f : c.fits) {
    std::cout << fmt::format("{}: {} shapes, rms relative error {:.1f} %, max {:.1f} %\n", f.hardware.key,
                             f.points.size(), 100 * f.rms_relative_error, 100 * f.max_relative_error);
    std::cout << fmt::format("  {:<34} {:>11} {:>13} {:>8} {:>7}  {}\n", "shape", "measured ms", "predicted ms",
                             "error", "spread", "costliest op");
    for (const auto& p : f.points)
      std::cout << fmt::format("  {:<34} {:11.3f} {:13.3f} {:+7.1f}% {:6.1f}%  {}\n", p.shape.describe(),
                               p.measured_s * 1e3, p.predicted_s * 1e3, 100 * (p.predicted_s / p.measured_s - 1),
                               100 * p.spread, p.bound);
    for (const auto& d : f.dropped) std::cout << "  fitted as free, so left out: " << d << "\n";
    j["fits"].push_back(to_json(f));
  }
  std::cout << "hardware catalogue written to " << a.out << " (use it as [sim] hardware_catalogue)\n";
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Measure the cpu backend's step times on this machine over a grid of prefill and decode shapes, fit the "
      "simulator's cost model to them and write a hardware catalogue ([sim] hardware_catalogue) with one entry per "
      "tensor-parallel degree; prints the fit's residuals");
  cmd->add_option("--config", args->config, "TOML config (default: the built-in default, cpu + default model)");
  cmd->add_option("--model", args->model, "GGUF file or safetensors folder (overrides model.path)");
  cmd->add_option("--tp", args->tp,
                  "Tensor parallel degrees measured, one catalogue entry each (default: 1, and 2 where the model "
                  "splits over 2 ranks)")
      ->delimiter(',')->check(CLI::Range(1u, 64u));
  cmd->add_option("--repeats", args->repeats, "Timed steps per shape and pass (median)")->capture_default_str()->check(CLI::Range(1u, 1000u));
  cmd->add_option("--passes", args->passes, "Passes over the whole grid (median of the passes)")->capture_default_str()->check(CLI::Range(1u, 100u));
  cmd->add_option("--name", args->name, "Catalogue key prefix: entries are NAME-tp1, NAME-tp2...")->capture_default_str();
  cmd->add_option("--out", args->out, "Hardware catalogue file written")->capture_default_str();
  cmd->add_flag("--quick", args->quick, "A ten-shape grid (seconds, for tests) instead of the full one (minutes)");
  cmd->add_flag("--fit-overlap", args->fit_overlap,
                "Fit memory_compute_overlap, the share of a kernel's memory time hidden under its arithmetic (or "
                "the reverse), among 0, 0.05, ..., 1 (default 0, their sum: it fits the grid better but has "
                "predicted served runs worse, README run 57)");
  cmd->callback([args, &exit_code] {
    try {
      exit_code = run(*args);
    } catch (const std::exception& e) {
      spdlog::error("calibrate: {}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace actorlm::tools
