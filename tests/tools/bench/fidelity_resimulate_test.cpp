// tools/bench/fidelity_resimulate.hpp: a saved bench fidelity run simulated again, with no model
// file and no server. The calibration's saved measurements are step times that a known machine
// gives by the cost model itself (a partial overlap, as the cpu backend's): the refit must find
// that machine, not the different entry the run's hardware.toml holds; files without
// measurements use that entry; a catalogue given instead is used as given; a drift-corrected
// run keeps its slowdowns; and a missing catalogue is named.
#define BOOST_TEST_MODULE tools_bench_fidelity_resimulate
#include "tools/bench/fidelity_resimulate.hpp"

#include "tools/bench/fidelity_json.hpp"

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace {

using namespace actorlm;
using namespace actorlm::bench;
namespace fs = std::filesystem;
namespace tt = boost::test_tools;

const sim::ModelPreset& preset() { return sim::Catalogue::builtin().model(fidelity_model_preset); }

// The machine the saved measurements come from.
sim::Hardware planted() {
  sim::Hardware h;
  h.key = "cpu-local-tp1";
  h.name = "planted";
  h.link = "none (one rank)";
  h.memory_bytes = 16.0 * (1ull << 30);
  h.bandwidth = h.host_bandwidth = h.link_bandwidth = 30e9;
  h.memory_overlap = 0.6;
  h.small_gemm_rows = 96;
  h.small_gemm_flops = 0.30e12;
  h.flops = 0.32e12;
  h.attention_flops = 0.035e12;
  h.prefill_attention_flops = 0.09e12;
  h.kernel_launch = 1e-6;
  return h;
}

// A catalogue file holding `h` (as calibrate writes one) with the engine's own time per step.
std::string catalogue_text(sim::Hardware h, double step_overhead) {
  h.step_overhead = step_overhead;
  Calibration c;
  c.model_path = "(test)";
  c.model = preset();
  c.read_bytes_per_s = h.bandwidth;
  c.memory_bytes = h.memory_bytes;
  CalibrationFit f;
  f.hardware = h;
  c.fits.push_back(f);
  return hardware_catalogue_toml(c);
}

// A run directory of its own, removed with the object: fidelity.json of a --quick run (one
// case, two rounds) whose calibration measured the quick grid on planted() in 3 passes, and a
// hardware.toml holding another machine (every rate half of planted()'s, no overlap).
struct SavedRun {
  fs::path dir = fs::temp_directory_path() / ("fidelity_resimulate_test_" + std::to_string(::getpid()));
  FidelityOptions options;
  FidelityReport report;
  sim::Hardware written = planted();
  static constexpr double step_overhead = 150e-6;

  SavedRun() {
    fs::create_directories(dir);
    options.quick = true;
    options.rounds = 2;
    options.fit_overlap = true;  // as the calibration fitted it: the refit does too
    report.hardware_key = "cpu-local-tp1";
    report.interleaved = true;
    for (const FidelityCase& c : fidelity_cases(options)) {
      FidelityResult r;
      r.c = c;
      for (double throughput : {200.0, 220.0}) {
        FidelityMetrics m;
        m.throughput = throughput;
        m.ttft_p50 = 0.05;
        m.ttft_p90 = 0.06;
        m.e2e_p50 = 0.9;
        m.e2e_p90 = 1.0;
        m.completed = c.spec.requests;
        r.rounds.push_back(m);
      }
      r.measured = median_over_rounds(r.rounds);
      report.cases.push_back(std::move(r));
    }
    const sim::CostModel truth(preset(), planted(), {sim::ParallelKind::tensor, 1}, 16);
    report.calibration.repeats = 2;
    report.calibration.block_size = 16;
    report.calibration.read_bytes_per_s = planted().bandwidth;
    report.calibration.bytes_per_weight = preset().weight_bytes;
    for (const auto& shape : quick_calibration_grid()) {
      CalibrationPoint p;
      p.shape = shape;
      const double t = truth.step_seconds(calibration_step_shape(shape, 2));
      p.pass_s = {1.03 * t, t, 0.98 * t};  // the median: t
      report.calibration.points.push_back(std::move(p));
    }
    for (double* rate : {&written.small_gemm_flops, &written.flops, &written.attention_flops,
                         &written.prefill_attention_flops})
      *rate /= 2;
    written.memory_overlap = 0;
    save();
  }
  ~SavedRun() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  void save() const {
    std::ofstream(dir / "fidelity.json") << fidelity_json(report, options).dump(2);
    std::ofstream(dir / "hardware.toml") << catalogue_text(written, step_overhead);
  }
  Resimulation resimulate(const std::string& hardware = "", const std::string& key = "",
                          std::optional<bool> fit_overlap = std::nullopt) const {
    ResimulateOptions o;
    o.dir = dir.string();
    o.hardware_catalogue = hardware;
    o.hardware_key = key;
    o.fit_overlap = fit_overlap;
    return resimulate_fidelity(o);
  }
};

// The case simulated directly on `h` (the step overhead as the catalogue holds it).
double simulated_throughput(const FidelityOptions& o, const FidelityReport& saved, const std::string& toml) {
  FidelityReport r = saved;
  score_fidelity(o, sim::Catalogue::parse(toml, "t.toml", sim::embedded_model_catalogue, "m.toml"), r);
  return r.cases.at(0).simulated.throughput;
}

}  // namespace

BOOST_AUTO_TEST_CASE(refits_the_saved_measurements_and_finds_the_machine_they_came_from) {
  const SavedRun run;
  const Resimulation re = run.resimulate();
  BOOST_TEST_REQUIRE(re.refit.has_value());
  const sim::Hardware& h = re.refit->hardware;
  BOOST_TEST(re.refit->rms_relative_error < 1e-6);
  BOOST_TEST(h.memory_overlap == 0.6, tt::tolerance(1e-12));
  const auto close = [](double got, double want) { return std::abs(got / want - 1) < 1e-4; };
  BOOST_TEST(close(h.flops, planted().flops), h.flops);
  BOOST_TEST(close(h.attention_flops, planted().attention_flops), h.attention_flops);
  BOOST_TEST(close(h.prefill_attention_flops, planted().prefill_attention_flops), h.prefill_attention_flops);
  // The entry's measured figures kept from the run's catalogue.
  BOOST_TEST(h.step_overhead == SavedRun::step_overhead, tt::tolerance(1e-9));
  BOOST_TEST(h.key == "cpu-local-tp1");
  // The run's own entry (half the rates) is far off the same measurements.
  BOOST_TEST(re.saved_fit_rms_relative_error > 0.1);
  // Simulated on the refitted entry as written (6 significant digits), measured as saved.
  const auto& c = re.report.cases.at(0);
  BOOST_TEST(c.simulated.throughput == simulated_throughput(run.options, run.report, re.report.calibration_toml));
  BOOST_TEST(c.measured.throughput == 210.0);
  BOOST_TEST(re.report.mean_abs_error_throughput == std::abs(c.simulated.throughput / 210.0 - 1), tt::tolerance(1e-12));
  BOOST_TEST(re.report.calibration_toml.find("memory_compute_overlap = 0.6 ") != std::string::npos);
  BOOST_TEST(re.options.fit_overlap);  // its own record re-simulates alike
}

BOOST_AUTO_TEST_CASE(refits_with_the_overlap_as_the_run_did_unless_told) {
  // Told to keep the sum: the planted overlap is not there to fit.
  SavedRun run;
  const Resimulation sum = run.resimulate("", "", false);
  BOOST_TEST_REQUIRE(sum.refit.has_value());
  BOOST_TEST(sum.refit->hardware.memory_overlap == 0);
  BOOST_TEST(sum.refit->rms_relative_error > 0.01);
  BOOST_TEST(!sum.options.fit_overlap);
  // A file from before the options kept fit_overlap, whose builds always fitted it: the entry's
  // overlap above 0 says so.
  run.options.fit_overlap = false;
  run.written.memory_overlap = 0.5;
  run.save();
  const Resimulation inferred = run.resimulate();
  BOOST_TEST_REQUIRE(inferred.refit.has_value());
  BOOST_TEST(inferred.refit->overlap_fitted);
  BOOST_TEST(inferred.refit->hardware.memory_overlap == 0.6, tt::tolerance(1e-12));
  // The run's entry at overlap 0 and no fit_overlap: the sum.
  run.written.memory_overlap = 0;
  run.save();
  BOOST_TEST(!run.resimulate().refit->overlap_fitted);
}

BOOST_AUTO_TEST_CASE(a_file_without_measurements_is_simulated_on_the_catalogue_the_run_wrote) {
  SavedRun run;
  run.report.calibration = {};  // as files written before 2026-12-07
  run.save();
  const Resimulation re = run.resimulate();
  BOOST_TEST(!re.refit.has_value());
  BOOST_TEST(re.hardware_source.find("as the run wrote it") != std::string::npos, re.hardware_source);
  const std::string written = catalogue_text(run.written, SavedRun::step_overhead);
  BOOST_TEST(re.report.calibration_toml == written);
  BOOST_TEST(re.report.cases.at(0).simulated.throughput == simulated_throughput(run.options, run.report, written));
}

BOOST_AUTO_TEST_CASE(a_catalogue_given_is_used_as_given_and_an_unknown_entry_names_the_file) {
  const SavedRun run;
  const fs::path other = run.dir / "other.toml";
  sim::Hardware h = planted();
  h.key = "elsewhere";
  std::ofstream(other) << catalogue_text(h, 50e-6);
  const Resimulation re = run.resimulate(other.string());
  BOOST_TEST(!re.refit.has_value());
  BOOST_TEST(re.report.hardware_key == "elsewhere");  // its first entry
  BOOST_TEST(re.report.calibrated_step_overhead == 50e-6, tt::tolerance(1e-9));
  BOOST_TEST(re.options.hardware_catalogue == other.string());  // its own record re-simulates alike
  BOOST_TEST(re.options.hardware_key == "elsewhere");
  try {
    (void)run.resimulate(other.string(), "nowhere");
    BOOST_FAIL("no error");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.rfind(other.string() + ": ", 0) == 0, what);
    BOOST_TEST(what.find("nowhere") != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_CASE(a_drift_corrected_run_keeps_each_cases_slowdown) {
  SavedRun run;
  run.options.drift_correction = true;
  run.options.interleave = false;
  run.report.drift_corrected = true;
  run.report.cases.at(0).slowdown = 1.25;
  run.save();
  const Resimulation re = run.resimulate();
  const auto& c = re.report.cases.at(0);
  BOOST_TEST(re.report.drift_corrected);
  BOOST_TEST(c.slowdown == 1.25);
  // Every step 1.25 times as long: the closed loop's throughput 1.25 times lower.
  BOOST_TEST(c.simulated.throughput * 1.25 == c.simulated_uncorrected.throughput, tt::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(names_the_missing_catalogue_of_the_run) {
  const SavedRun run;
  fs::remove(run.dir / "hardware.toml");
  try {
    (void)run.resimulate();
    BOOST_FAIL("no error");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()) == (run.dir / "hardware.toml").string() +
                                            ": cannot be read (the run's calibration; a run given --hardware before "
                                            "2026-12-07 kept none: give the same catalogue again with --hardware)");
  }
}
