// run_scenario and the files of `actorlm simulate --out DIR`.
#include "sim/scenario_run.hpp"

#include "sim/backend/sim_backend.hpp"
#include "sim/svg_plot.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace actorlm::sim {

namespace {

std::string rate_label(double rate) {
  std::string s = format_fixed(rate, 3);
  while (s.back() == '0') s.pop_back();  // "2.000" -> "2", "0.250" -> "0.25"
  if (s.back() == '.') s.pop_back();
  return s;
}

// A directory name from a workload name: letters, digits, '-', '_' and '.' kept.
std::string slug(const std::string& name) {
  std::string out;
  for (char ch : name)
    out += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.') ? ch : '_';
  return out.empty() ? "workload" : out;
}

void write_file(const std::filesystem::path& path, const std::string& text,
                std::vector<std::string>& written) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
  written.push_back(path.string());
}

std::vector<std::pair<std::string, std::uint64_t>> components(const MemoryBreakdown& m) {
  const auto b = [](double x) { return static_cast<std::uint64_t>(std::max(0.0, x)); };
  return {{"weights", b(m.weights_bytes)},       {"activations", b(m.activation_bytes)},
          {"CUDA context", b(m.cuda_context_bytes)}, {"framework", b(m.framework_bytes)},
          {"comm buffers", b(m.comm_bytes)},     {"KV cache", b(m.kv_bytes)},
          {"spare", b(m.spare_bytes)}};
}

}  // namespace

ScenarioOutcome run_scenario(const Scenario& s, const ScenarioRunOptions& opt) {
  // Checked here, not where the scenario is read: `bench client` takes the same workloads to a
  // server whose model length the scenario's engine sections do not describe.
  for (const auto& w : s.workloads)
    for (const auto& r : s.regimes)
      if (w.spec.max_tokens > 0 && w.spec.max_tokens >= r.config.model.max_model_len)
        throw std::invalid_argument("workload \"" + w.name + "\": max_tokens = " + std::to_string(w.spec.max_tokens) +
                                    " leaves no room for a prompt in regime \"" + r.name + "\" (model.max_model_len = " +
                                    std::to_string(r.config.model.max_model_len) +
                                    "): every request would be refused as too long");
  ScenarioOutcome out;
  out.seed = opt.seed;
  for (const auto& r : s.regimes) out.regimes.push_back(r.name);
  for (const auto& w : s.workloads) {
    WorkloadOutcome wo;
    wo.name = w.name;
    wo.description = to_string(w.spec);
    wo.rates = w.load_sweep;
    const std::size_t points = std::max<std::size_t>(1, w.load_sweep.size());
    for (std::size_t p = 0; p < points; ++p) {
      const WorkloadSpec spec = w.load_sweep.empty() ? w.spec : at_rate(w.spec, w.load_sweep[p]);
      std::vector<SimulationResult> row;
      for (const auto& r : s.regimes) {
        SimulationOptions so;
        so.summary.slo = s.slo;
        so.progress = opt.progress;
        so.label = r.name + " / " + w.name +
                   (w.load_sweep.empty() ? "" : " @ " + rate_label(w.load_sweep[p]) + " req/s");
        try {
          row.push_back(simulate(r.config, spec, opt.seed, so));
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument("regime \"" + r.name + "\": " + e.what());
        }
        if (opt.log)
          opt.log(so.label + ": " + std::to_string(row.back().summary.completed) + " requests in " +
                  format_fixed(row.back().summary.duration_s, 1) + " s simulated, " +
                  format_fixed(row.back().wall_seconds, 2) + " s wall");
      }
      wo.points.push_back(std::move(row));
    }
    out.workloads.push_back(std::move(wo));
  }
  return out;
}

std::vector<RegimeResult> regime_results(const ScenarioOutcome& o, const WorkloadOutcome& w,
                                         std::size_t point) {
  std::vector<RegimeResult> out;
  for (std::size_t r = 0; r < o.regimes.size(); ++r) {
    std::string name = o.regimes[r];
    if (!w.rates.empty()) name += " @ " + rate_label(w.rates[point]) + " req/s";
    out.push_back({name, w.points[point][r].summary});
  }
  return out;
}

std::string scenario_table(const ScenarioOutcome& o) {
  std::string out;
  for (const auto& w : o.workloads) {
    out += "workload " + w.name + ": " + w.description + " (seed " + std::to_string(o.seed) + ")\n";
    std::vector<RegimeResult> rows;
    for (std::size_t p = 0; p < w.points.size(); ++p)
      for (auto& r : regime_results(o, w, p)) rows.push_back(std::move(r));
    out += summary_table(rows);
    std::uint64_t refused = 0, too_long = 0, invalid = 0, unavailable = 0, errored = 0;
    std::string first_error;
    for (const auto& point : w.points)
      for (const auto& r : point) {
        refused += r.refused;
        too_long += r.too_long;
        invalid += r.invalid;
        unavailable += r.unavailable;
        errored += r.errored;
        if (first_error.empty()) first_error = r.first_error;
      }
    if (refused > too_long + invalid)
      out += std::to_string(refused - too_long - invalid) +
             " submissions refused: the queue was full (scheduler.max_queue_len)\n";
    if (invalid > 0)
      out += std::to_string(invalid) + " submissions refused as invalid: the simulator built requests its scheduler " +
             "does not take (a bug; please report it with the scenario)\n";
    if (too_long > 0)
      out += std::to_string(too_long) + " submissions refused as too long: prompt + max_tokens fits no " +
             "sequence (model.max_model_len, the KV cache or, without chunked prefill, the token budget)\n";
    if (errored > 0) out += std::to_string(errored) + " requests ended with an engine error, the first: " + first_error + "\n";
    if (unavailable > 0)
      out += std::to_string(unavailable) + " submissions refused by an engine that had lost a component\n";
    out += "\n";
  }
  return out;
}

std::string memory_report(const Scenario& s) {
  std::string out;
  for (const auto& r : s.regimes) {
    SimBackend b;
    try {
      b = load_sim_backend(r.config);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("regime \"" + r.name + "\": " + e.what());
    }
    out += r.name + ": " + b.model.name + " on " +
           (b.instance ? instances_label(b.instance->key, b.parallelism.nodes) + " (" + b.hardware.name + ")"
                       : b.hardware.name) +
           "\n";
    for (const auto& m : b.memory_per_gpu)
      out += "  " + describe_memory(m, b.model, b.hardware) + "\n";
  }
  return out;
}

std::vector<std::string> write_reports(const ScenarioOutcome& o, const Scenario& s,
                                       const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> written;
  fs::create_directories(dir);
  for (const auto& w : o.workloads) {
    const fs::path wdir = fs::path(dir) / slug(w.name);
    fs::create_directories(wdir);
    std::vector<RegimeResult> all;
    std::string requests;
    for (std::size_t p = 0; p < w.points.size(); ++p) {
      auto rows = regime_results(o, w, p);
      for (std::size_t r = 0; r < rows.size(); ++r)
        requests += requests_csv(rows[r].name, w.points[p][r].requests, s.slo, requests.empty());
      for (auto& r : rows) all.push_back(std::move(r));
    }
    write_file(wdir / "summary.csv", summary_csv(all), written);
    write_file(wdir / "requests.csv", requests, written);
    write_file(wdir / "series.csv", series_csv(all), written);
    write_file(wdir / "report.json", report_json(all), written);
    // Time series of the heaviest point (the last rate of a sweep).
    const auto last = regime_results(o, w, w.points.size() - 1);
    write_file(wdir / "kv_usage.svg", render_line_chart(kv_usage_over_time(last)), written);
    write_file(wdir / "batch_size.svg", render_line_chart(batch_size_over_time(last)), written);
    if (!w.rates.empty()) {
      LineChart chart;
      chart.title = w.name + ": latency against load";
      chart.x_label = "offered load (req/s)";
      chart.y_label = "p90 end-to-end latency (s)";
      for (std::size_t r = 0; r < o.regimes.size(); ++r) {
        LineSeries line{o.regimes[r], {}, {}};
        for (std::size_t p = 0; p < w.points.size(); ++p) {
          line.x.push_back(w.rates[p]);
          line.y.push_back(w.points[p][r].summary.e2e_s.p90);
        }
        chart.series.push_back(std::move(line));
      }
      write_file(wdir / "latency_vs_load.svg", render_line_chart(chart), written);
      // The same, zoomed: points above 3x the worst latency at the lightest load are left out
      // (non-finite points are skipped), so a saturated regime does not flatten the others.
      double light = 0;
      for (const auto& line : chart.series) light = std::max(light, line.y.front());
      for (auto& line : chart.series)
        for (double& y : line.y)
          if (y > 3 * light) y = std::numeric_limits<double>::quiet_NaN();
      chart.title += " (zoomed: points above " + format_fixed(3 * light, 1) + " s left out)";
      write_file(wdir / "latency_vs_load_zoom.svg", render_line_chart(chart), written);
    }
  }
  // Memory: the same for every workload; take each regime's first run.
  if (!o.workloads.empty() && !o.workloads.front().points.empty()) {
    std::vector<MemoryBar> bars;
    const auto& first = o.workloads.front().points.front();
    for (std::size_t r = 0; r < o.regimes.size(); ++r)
      for (const auto& m : first[r].memory_per_gpu) {
        // Short labels: the chart's label margin is fixed (~15 characters).
        const std::string label = m.parallelism.kind == ParallelKind::tensor
                                      ? o.regimes[r] + " TP" + std::to_string(m.parallelism.degree)
                                      : o.regimes[r] + (m.parallelism.stage_tp > 1 ? " S" : " GPU") + std::to_string(m.gpu);
        bars.push_back({label, components(m), static_cast<std::uint64_t>(m.device_bytes)});
      }
    const std::string title = s.name.empty() ? "memory per GPU" : s.name + ": memory per GPU";
    write_file(fs::path(dir) / "memory.svg",
               render_stacked_bar_chart(memory_breakdown_chart(title, bars)), written);
  }
  return written;
}

}  // namespace actorlm::sim
