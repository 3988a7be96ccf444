#include "tools/bench/fidelity_json.hpp"

#include "tools/bench/timing.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace actorlm::bench {

namespace {

using nlohmann::json;

json metrics_json(const FidelityMetrics& m) {
  json j = {{"throughput", m.throughput}, {"ttft_p50", m.ttft_p50}, {"ttft_p90", m.ttft_p90},
            {"e2e_p50", m.e2e_p50},       {"e2e_p90", m.e2e_p90},   {"completed", m.completed}};
  // In the units people read, and in seconds as measured (what is read back: a median of two
  // rounds of values scaled and scaled back can move in its last bit).
  if (m.steps > 0) {
    j["steps"] = m.steps;
    j["step_ms"] = 1e3 * m.step_s;
    j["step_s"] = m.step_s;
    j["idle_s"] = m.idle_s;
  }
  if (m.serving_step_overhead >= 0) {
    j["engine_own_us_per_step"] = 1e6 * m.serving_step_overhead;
    j["engine_own_s_per_step"] = m.serving_step_overhead;
  }
  if (m.client_cpu_per_token >= 0) {
    j["client_cpu_us_per_token"] = 1e6 * m.client_cpu_per_token;
    j["client_cpu_s_per_token"] = m.client_cpu_per_token;
  }
  return j;
}

json case_json(const FidelityResult& c) {
  using M = FidelityMetrics;
  json rounds = json::array();
  for (const auto& m : c.rounds) rounds.push_back(metrics_json(m));
  return {{"workload", c.c.workload},
          {"regime", config::to_string(c.c.regime)},
          {"clients", c.c.clients},
          {"requests", c.c.spec.requests},
          {"measured", metrics_json(c.measured)},
          {"rounds", std::move(rounds)},
          {"simulated", metrics_json(c.simulated)},
          {"simulated_uncorrected", metrics_json(c.simulated_uncorrected)},
          {"slowdown", c.slowdown},
          {"error_throughput", c.error(&M::throughput)},
          {"error_p90_ttft", c.error(&M::ttft_p90)},
          {"error_p90_e2e", c.error(&M::e2e_p90)}};
}

json calibration_json(const SavedCalibration& c) {
  json points = json::array();
  for (const auto& p : c.points) {
    json passes = json::array();
    for (double t : p.pass_s) passes.push_back(t);  // seconds, as measured: read back to the bit
    points.push_back({{"shape", p.shape.describe()},
                      {"chunk", p.shape.chunk},
                      {"offset", p.shape.offset},
                      {"prompts", p.shape.prompts},
                      {"batch", p.shape.batch},
                      {"context", p.shape.context},
                      {"passes_s", std::move(passes)}});
  }
  return {{"repeats", c.repeats},
          {"block_size", c.block_size},
          {"read_bytes_per_s", c.read_bytes_per_s},  // as measured: read back to the bit
          {"bytes_per_weight", c.bytes_per_weight},
          {"points", std::move(points)}};
}

// Reads fields of one JSON object, naming the file and the field's path in errors.
class Fields {
 public:
  Fields(const std::string& file, std::string path, const json& object) : file_(file), path_(std::move(path)), j_(object) {
    if (!j_.is_object()) fail("", "expected an object");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    const std::string where = key.empty() ? path_ : path_.empty() ? key : path_ + "." + key;
    throw std::runtime_error(file_ + ": " + (where.empty() ? std::string("the document") : where) + ": " + what +
                             " (not a fidelity.json written by `actorlm bench fidelity --out`?)");
  }
  bool has(const std::string& key) const { return j_.contains(key); }
  const json& at(const std::string& key) const {
    if (!j_.contains(key)) fail(key, "missing");
    return j_.at(key);
  }
  double number(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_number()) fail(key, "expected a number, found " + v.dump());
    return v.get<double>();
  }
  double number_or(const std::string& key, double absent) const { return has(key) ? number(key) : absent; }
  std::uint64_t count(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_number_unsigned()) fail(key, "expected a count, found " + v.dump());
    return v.get<std::uint64_t>();
  }
  std::uint32_t count32(const std::string& key) const {
    const std::uint64_t v = count(key);
    if (v > 0xffffffffu) fail(key, "expected a count below 2^32, found " + std::to_string(v));
    return static_cast<std::uint32_t>(v);
  }
  std::string text(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_string()) fail(key, "expected a string, found " + v.dump());
    return v.get<std::string>();
  }
  bool flag(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_boolean()) fail(key, "expected true or false, found " + v.dump());
    return v.get<bool>();
  }
  const json& array(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_array()) fail(key, "expected an array, found " + v.dump());
    return v;
  }
  Fields object(const std::string& key) const { return {file_, path_.empty() ? key : path_ + "." + key, at(key)}; }
  Fields element(const std::string& key, std::size_t i) const {
    return {file_, (path_.empty() ? key : path_ + "." + key) + "[" + std::to_string(i) + "]", array(key).at(i)};
  }

 private:
  const std::string& file_;
  std::string path_;
  const json& j_;
};

FidelityMetrics read_metrics(const Fields& f) {
  FidelityMetrics m;
  m.throughput = f.number("throughput");
  m.ttft_p50 = f.number("ttft_p50");
  m.ttft_p90 = f.number("ttft_p90");
  m.e2e_p50 = f.number("e2e_p50");
  m.e2e_p90 = f.number("e2e_p90");
  m.completed = f.count("completed");
  m.steps = f.number_or("steps", 0);
  // Seconds where the file has them (from 2026-12-07 on), else the scaled figures.
  m.step_s = f.has("step_s") ? f.number("step_s") : f.number_or("step_ms", -1e3) / 1e3;
  m.idle_s = f.number_or("idle_s", -1);
  m.serving_step_overhead = f.has("engine_own_s_per_step") ? f.number("engine_own_s_per_step")
                                                           : f.number_or("engine_own_us_per_step", -1e6) / 1e6;
  m.client_cpu_per_token = f.has("client_cpu_s_per_token") ? f.number("client_cpu_s_per_token")
                                                           : f.number_or("client_cpu_us_per_token", -1e6) / 1e6;
  return m;
}

SavedCalibration read_calibration(const Fields& f) {
  SavedCalibration c;
  c.repeats = f.count32("repeats");
  c.block_size = f.count32("block_size");
  if (c.repeats < 1 || c.repeats > 1000) f.fail("repeats", "expected 1 to 1000");
  if (c.block_size < 1 || c.block_size > 1024) f.fail("block_size", "expected 1 to 1024");
  c.read_bytes_per_s = f.number("read_bytes_per_s");
  c.bytes_per_weight = f.number("bytes_per_weight");
  if (c.read_bytes_per_s <= 0 || c.bytes_per_weight <= 0) f.fail("", "read_bytes_per_s and bytes_per_weight must be above 0");
  for (std::size_t i = 0; i < f.array("points").size(); ++i) {
    const Fields p = f.element("points", i);
    CalibrationPoint point;
    point.shape.chunk = p.count32("chunk");
    point.shape.offset = p.count32("offset");
    point.shape.prompts = p.count32("prompts");
    point.shape.batch = p.count32("batch");
    point.shape.context = p.count32("context");
    for (std::size_t k = 0; k < p.array("passes_s").size(); ++k) {
      const json& t = p.array("passes_s")[k];
      if (!t.is_number() || t.get<double>() <= 0) p.fail("passes_s", "expected times in seconds above 0, found " + t.dump());
      point.pass_s.push_back(t.get<double>());
    }
    if (point.pass_s.empty()) p.fail("passes_s", "no pass");
    point.measured_s = median(point.pass_s);  // as calibrate takes it
    const auto [lo, hi] = std::minmax_element(point.pass_s.begin(), point.pass_s.end());
    point.spread = (*hi - *lo) / point.measured_s;
    c.points.push_back(std::move(point));
  }
  return c;
}

}  // namespace

json fidelity_summary_json(const FidelityReport& r) {
  return {{"bench", "fidelity"},
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
}

json fidelity_json(const FidelityReport& r, const FidelityOptions& o) {
  json cases = json::array();
  for (const auto& c : r.cases) cases.push_back(case_json(c));
  json doc = {{"summary", fidelity_summary_json(r)},
              {"options",
               {{"model", o.model_path},
                {"max_num_seqs", o.max_num_seqs},
                {"kv_blocks", o.kv_blocks},
                {"seed", o.seed},
                {"rounds", o.rounds},
                {"quick", o.quick},
                {"hardware", o.hardware_catalogue},
                {"hardware_key", o.hardware_key},
                {"interleave", o.interleave},
                {"fit_overlap", o.fit_overlap},
                {"drift_correction", o.drift_correction}}},
              {"cases", std::move(cases)}};
  if (!r.calibration.empty()) doc["calibration"] = calibration_json(r.calibration);
  return doc;
}

SavedFidelityRun read_fidelity_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw std::runtime_error(path + ": not JSON");
  const Fields root(path, "", doc);
  SavedFidelityRun run;
  if (root.has("options")) {
    const Fields o = root.object("options");
    run.options_saved = true;
    run.options.model_path = o.text("model");
    run.options.max_num_seqs = o.count32("max_num_seqs");
    run.options.kv_blocks = o.count32("kv_blocks");
    run.options.seed = o.count("seed");
    run.options.rounds = o.count32("rounds");
    run.options.quick = o.flag("quick");
    // Kept from 2026-12-07 on, later than the rest: the defaults where absent.
    if (o.has("hardware")) run.options.hardware_catalogue = o.text("hardware");
    if (o.has("hardware_key")) run.options.hardware_key = o.text("hardware_key");
    if (o.has("interleave")) run.options.interleave = o.flag("interleave");
    if (o.has("fit_overlap")) run.options.fit_overlap = o.flag("fit_overlap");
    run.options.drift_correction = o.has("drift_correction") ? o.flag("drift_correction") : false;
    // The command line's ranges (cmd_bench_fidelity.cpp): the cases are built from these.
    if (run.options.max_num_seqs < 4 || run.options.max_num_seqs > 256) o.fail("max_num_seqs", "expected 4 to 256");
    if (run.options.kv_blocks < 140 || run.options.kv_blocks > (1u << 20)) o.fail("kv_blocks", "expected 140 to 1048576");
    if (run.options.rounds < 1 || run.options.rounds > 20) o.fail("rounds", "expected 1 to 20");
  }
  const Fields summary = root.object("summary");
  FidelityReport& r = run.report;
  r.hardware_key = summary.text("hardware");
  r.machine_drift = summary.number("machine_drift");
  r.interleaved = summary.flag("calibration_interleaved");
  r.calibration_pass_spread = summary.number("calibration_pass_spread");
  // A drift-corrected run's cases were simulated on slowed hardware (each case's slowdown below).
  r.drift_corrected = summary.flag("drift_corrected");
  run.options.drift_correction = r.drift_corrected;
  if (root.has("calibration")) r.calibration = read_calibration(root.object("calibration"));
  // The cases as this build makes them from the options, each checked against the file's.
  const std::vector<FidelityCase> cases = fidelity_cases(run.options);
  if (root.array("cases").size() != cases.size())
    root.fail("cases", std::to_string(root.array("cases").size()) + " cases, where its options make " +
                           std::to_string(cases.size()));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Fields c = root.element("cases", i);
    const std::string regime = c.text("regime");
    if (c.text("workload") != cases[i].workload || regime != config::to_string(cases[i].regime) ||
        c.count("clients") != cases[i].clients)
      c.fail("", "the case " + c.text("workload") + " / " + regime + " / " + std::to_string(c.count("clients")) +
                     " clients, where this build's case " + std::to_string(i + 1) + " is " + cases[i].workload + " / " +
                     std::string(config::to_string(cases[i].regime)) + " / " + std::to_string(cases[i].clients) +
                     " clients");
    FidelityResult result;
    result.c = cases[i];
    for (std::size_t k = 0; k < c.array("rounds").size(); ++k) result.rounds.push_back(read_metrics(c.element("rounds", k)));
    if (result.rounds.empty()) c.fail("rounds", "no measured round");
    result.measured = median_over_rounds(result.rounds);
    result.slowdown = c.number_or("slowdown", 1);
    if (!(result.slowdown > 0)) c.fail("slowdown", "expected a factor above 0");
    r.cases.push_back(std::move(result));
  }
  return run;
}

}  // namespace actorlm::bench
