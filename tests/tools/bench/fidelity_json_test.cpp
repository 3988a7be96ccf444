// tools/bench/fidelity_json.hpp: a bench fidelity run saved as fidelity.json and read back, as
// `--resimulate` reads it: every measured round, the options and the calibration's measurements
// to the bit; files from before the options were saved; and errors that name the file and field.
#define BOOST_TEST_MODULE tools_bench_fidelity_json
#include "tools/bench/fidelity_json.hpp"

#include "tools/bench/timing.hpp"

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <tuple>

namespace {

using namespace actorlm;
using namespace actorlm::bench;
using nlohmann::json;

// A file of its own in the temporary directory, removed with the object.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".json")).string()) {}
  ~TempFile() { std::filesystem::remove(path); }
  void write(const std::string& text) const { std::ofstream(path, std::ios::binary) << text; }
};

// A report as run_fidelity makes one, with random figures: `rounds` rounds of every case of
// `o`, some of them without the server's step counters, and a calibration of 5 shapes x 3 passes.
FidelityReport random_report(const FidelityOptions& o, std::uint32_t rounds, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.001, 1000.0);
  FidelityReport r;
  r.hardware_key = "cpu-local-tp1";
  r.machine_drift = -0.0123456789;
  r.interleaved = true;
  r.calibration_pass_spread = 0.1712345;
  r.drift_corrected = o.drift_correction;  // as score_fidelity records it
  for (const FidelityCase& c : fidelity_cases(o)) {
    FidelityResult res;
    res.c = c;
    for (std::uint32_t k = 0; k < rounds; ++k) {
      FidelityMetrics m;
      m.throughput = u(rng);
      m.ttft_p50 = u(rng);
      m.ttft_p90 = u(rng);
      m.e2e_p50 = u(rng);
      m.e2e_p90 = u(rng);
      m.completed = c.spec.requests;
      m.client_cpu_per_token = u(rng) * 1e-6;
      if (k % 2 == 0) {  // the counters read
        m.steps = std::floor(u(rng));
        m.step_s = u(rng) * 1e-3;
        m.idle_s = u(rng) * 1e-3;
        m.serving_step_overhead = u(rng) * 1e-6;
      }
      res.rounds.push_back(m);
    }
    res.measured = median_over_rounds(res.rounds);
    res.slowdown = 0.9 + u(rng) / 5000;
    r.cases.push_back(std::move(res));
  }
  r.calibration.repeats = 3;
  r.calibration.block_size = 16;
  r.calibration.read_bytes_per_s = 35.49037e9 + u(rng);
  r.calibration.bytes_per_weight = 96576768.0 / 134515008.0;
  for (std::uint32_t i = 0; i < 5; ++i) {
    CalibrationPoint p;
    p.shape = {.chunk = i * 16, .offset = i * 8, .prompts = 1 + i % 2, .batch = i * 3, .context = 64 * i + 64};
    for (int k = 0; k < 3; ++k) p.pass_s.push_back(u(rng) * 1e-3);
    r.calibration.points.push_back(std::move(p));
  }
  return r;
}

// Every figure to the bit: the medians over two rounds a re-simulation recomputes must come out
// as the run's did.
bool same(const FidelityMetrics& a, const FidelityMetrics& b) {
  return a.throughput == b.throughput && a.ttft_p50 == b.ttft_p50 && a.ttft_p90 == b.ttft_p90 &&
         a.e2e_p50 == b.e2e_p50 && a.e2e_p90 == b.e2e_p90 && a.completed == b.completed && a.steps == b.steps &&
         a.step_s == b.step_s && a.idle_s == b.idle_s && a.serving_step_overhead == b.serving_step_overhead &&
         a.client_cpu_per_token == b.client_cpu_per_token;
}

// The error read_fidelity_json gives for `doc` written to a file ("FILE: ..." with FILE removed).
std::string error_of(const std::string& doc) {
  const TempFile f("fidelity_json_error");
  f.write(doc);
  try {
    (void)read_fidelity_json(f.path);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    return what.rfind(f.path + ": ", 0) == 0 ? what.substr(f.path.size() + 2) : "(no file name) " + what;
  }
  return "(no error)";
}

json saved_document() {
  FidelityOptions o;
  o.quick = true;
  std::mt19937_64 rng(7);
  return fidelity_json(random_report(o, 2, rng), o);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_saved_run_reads_back_with_every_round_its_options_and_its_calibration_to_the_bit) {
  std::mt19937_64 rng(2026);
  for (const bool quick : {false, true}) {
    FidelityOptions o;
    o.quick = quick;
    o.max_num_seqs = quick ? 16 : 24;
    o.kv_blocks = 2048;
    o.seed = 42;
    o.rounds = quick ? 2 : 3;
    o.model_path = "/models/x.gguf";
    o.hardware_catalogue = quick ? "" : "/catalogues/hw.toml";
    o.hardware_key = quick ? "" : "k-tp1";
    o.interleave = quick;
    o.drift_correction = !quick;
    o.fit_overlap = quick;
    const FidelityReport want = random_report(o, o.rounds, rng);
    const TempFile f("fidelity_json_round_trip");
    f.write(fidelity_json(want, o).dump(2));
    const SavedFidelityRun got = read_fidelity_json(f.path);
    BOOST_TEST(got.options_saved);
    BOOST_TEST(got.options.max_num_seqs == o.max_num_seqs);
    BOOST_TEST(got.options.kv_blocks == o.kv_blocks);
    BOOST_TEST(got.options.seed == o.seed);
    BOOST_TEST(got.options.rounds == o.rounds);
    BOOST_TEST(got.options.quick == o.quick);
    BOOST_TEST(got.options.model_path == o.model_path);
    BOOST_TEST(got.options.hardware_catalogue == o.hardware_catalogue);
    BOOST_TEST(got.options.hardware_key == o.hardware_key);
    BOOST_TEST(got.options.interleave == o.interleave);
    BOOST_TEST(got.options.drift_correction == o.drift_correction);
    BOOST_TEST(got.options.fit_overlap == o.fit_overlap);
    const FidelityReport& r = got.report;
    BOOST_TEST(r.hardware_key == want.hardware_key);
    BOOST_TEST(r.machine_drift == want.machine_drift);
    BOOST_TEST(r.interleaved == want.interleaved);
    BOOST_TEST(r.calibration_pass_spread == want.calibration_pass_spread);
    BOOST_TEST_REQUIRE(r.cases.size() == want.cases.size());
    for (std::size_t i = 0; i < r.cases.size(); ++i) {
      BOOST_TEST_CONTEXT("case " << i + 1) {
        BOOST_TEST(r.cases[i].c.workload == want.cases[i].c.workload);
        BOOST_TEST((r.cases[i].c.regime == want.cases[i].c.regime));
        BOOST_TEST(r.cases[i].c.clients == want.cases[i].c.clients);
        BOOST_TEST(r.cases[i].c.spec.requests == want.cases[i].c.spec.requests);  // rebuilt from the options
        BOOST_TEST_REQUIRE(r.cases[i].rounds.size() == want.cases[i].rounds.size());
        for (std::size_t k = 0; k < r.cases[i].rounds.size(); ++k)
          BOOST_TEST(same(r.cases[i].rounds[k], want.cases[i].rounds[k]), "round " << k + 1);
        BOOST_TEST(same(r.cases[i].measured, want.cases[i].measured));
        BOOST_TEST(r.cases[i].slowdown == want.cases[i].slowdown);
      }
    }
    const SavedCalibration& c = r.calibration;
    BOOST_TEST(c.repeats == want.calibration.repeats);
    BOOST_TEST(c.block_size == want.calibration.block_size);
    BOOST_TEST(c.read_bytes_per_s == want.calibration.read_bytes_per_s);  // exactly: the refit's input
    BOOST_TEST(c.bytes_per_weight == want.calibration.bytes_per_weight);
    BOOST_TEST_REQUIRE(c.points.size() == want.calibration.points.size());
    for (std::size_t i = 0; i < c.points.size(); ++i) {
      const auto& [p, q] = std::tie(c.points[i], want.calibration.points[i]);
      BOOST_TEST(p.shape.describe() == q.shape.describe());
      BOOST_TEST(p.pass_s == q.pass_s, boost::test_tools::per_element());
      BOOST_TEST(p.measured_s == median(q.pass_s));  // as calibrate takes a shape's time
    }
  }
}

BOOST_AUTO_TEST_CASE(a_file_from_before_the_options_were_saved_reads_with_the_defaults_and_no_calibration) {
  // A default run's twelve cases, written as the files of runs 49-55 are: no options, no calibration.
  FidelityOptions defaults;
  std::mt19937_64 rng(3);
  json doc = fidelity_json(random_report(defaults, 1, rng), defaults);
  doc.erase("options");
  doc.erase("calibration");
  const TempFile f("fidelity_json_old");
  f.write(doc.dump());
  const SavedFidelityRun got = read_fidelity_json(f.path);
  BOOST_TEST(!got.options_saved);
  BOOST_TEST(got.options.max_num_seqs == defaults.max_num_seqs);
  BOOST_TEST(got.options.kv_blocks == defaults.kv_blocks);
  BOOST_TEST(got.report.cases.size() == 12u);
  BOOST_TEST(got.report.calibration.empty());
}

BOOST_AUTO_TEST_CASE(a_file_from_before_seconds_were_saved_reads_the_scaled_figures) {
  json doc = saved_document();
  json& round = doc["cases"][0]["rounds"][0];  // the first round has the server's counters
  for (const char* key : {"step_s", "engine_own_s_per_step", "client_cpu_s_per_token"}) round.erase(key);
  round["step_ms"] = 7.5;
  round["engine_own_us_per_step"] = 300.0;
  round["client_cpu_us_per_token"] = 20.0;
  const TempFile f("fidelity_json_scaled");
  f.write(doc.dump());
  const FidelityMetrics m = read_fidelity_json(f.path).report.cases.at(0).rounds.at(0);
  BOOST_TEST(m.step_s == 7.5e-3, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(m.serving_step_overhead == 300e-6, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(m.client_cpu_per_token == 20e-6, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(names_the_file_and_the_field_of_what_it_cannot_read) {
  BOOST_TEST(error_of("{\"summary\": ") == "not JSON");
  BOOST_TEST(error_of("[1, 2]") ==
             "the document: expected an object (not a fidelity.json written by `actorlm bench fidelity --out`?)");
  json doc = saved_document();
  doc["cases"][0]["rounds"][1].erase("e2e_p90");
  BOOST_TEST(error_of(doc.dump()) ==
             "cases[0].rounds[1].e2e_p90: missing (not a fidelity.json written by `actorlm bench fidelity --out`?)");
  doc = saved_document();
  doc["calibration"]["points"][2]["passes_s"][1] = -0.5;
  BOOST_TEST(error_of(doc.dump()) ==
             "calibration.points[2].passes_s: expected times in seconds above 0, found -0.5 (not a fidelity.json "
             "written by `actorlm bench fidelity --out`?)");
  doc = saved_document();
  doc["summary"]["hardware"] = 3;
  BOOST_TEST(error_of(doc.dump()) ==
             "summary.hardware: expected a string, found 3 (not a fidelity.json written by `actorlm bench fidelity "
             "--out`?)");
  doc = saved_document();
  doc["options"]["max_num_seqs"] = 3;
  BOOST_TEST(error_of(doc.dump()) ==
             "options.max_num_seqs: expected 4 to 256 (not a fidelity.json written by `actorlm bench fidelity --out`?)");
  doc = saved_document();
  doc["calibration"]["points"][0]["batch"] = 5000000000ull;
  BOOST_TEST(error_of(doc.dump()) ==
             "calibration.points[0].batch: expected a count below 2^32, found 5000000000 (not a fidelity.json "
             "written by `actorlm bench fidelity --out`?)");
  doc = saved_document();
  doc["cases"][0]["rounds"] = json::array();
  BOOST_TEST(error_of(doc.dump()) ==
             "cases[0].rounds: no measured round (not a fidelity.json written by `actorlm bench fidelity --out`?)");
}

BOOST_AUTO_TEST_CASE(refuses_cases_that_its_options_do_not_build) {
  json doc = saved_document();  // --quick: one case, short-in-long-out / paged / 2 clients
  doc["cases"][0]["clients"] = 3;
  BOOST_TEST(error_of(doc.dump()) ==
             "cases[0]: the case short-in-long-out / paged / 3 clients, where this build's case 1 is short-in-long-out "
             "/ paged / 2 clients (not a fidelity.json written by `actorlm bench fidelity --out`?)");
  doc = saved_document();
  doc["options"]["quick"] = false;  // twelve cases, not one
  BOOST_TEST(error_of(doc.dump()) ==
             "cases: 1 cases, where its options make 12 (not a fidelity.json written by `actorlm bench fidelity "
             "--out`?)");
}

BOOST_AUTO_TEST_CASE(says_when_the_file_cannot_be_read) {
  const std::string path = "/nonexistent-dir/fidelity.json";
  try {
    (void)read_fidelity_json(path);
    BOOST_FAIL("no error");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()) == path + ": cannot be read");
  }
}
