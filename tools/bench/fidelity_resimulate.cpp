#include "tools/bench/fidelity_resimulate.hpp"

#include "tools/bench/fidelity_json.hpp"

#include <spdlog/fmt/fmt.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

namespace actorlm::bench {

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot be read (" + what + ")");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The rms relative error of `h` (its step overhead aside, as calibrate's residuals) over the
// calibration's measurements.
double rms_over(const sim::ModelPreset& m, sim::Hardware h, const SavedCalibration& c) {
  h.step_overhead = 0;
  std::vector<CalibrationPoint> points = c.points;
  return predict_points(m, h, 1, c.block_size, c.repeats, points).rms;
}

// The catalogue `text` read from `path` (with the embedded models), and its entry `key` (empty:
// the first), or an error naming the file.
std::pair<sim::Catalogue, std::string> catalogue_entry(const std::string& text, const std::string& path,
                                                       const std::string& key, const std::string& what) {
  sim::Catalogue c = sim::Catalogue::parse(text, path, sim::embedded_model_catalogue, "(embedded models)");
  if (c.all_hardware().empty()) throw std::runtime_error(path + ": no [gpu.*] entry (" + what + ")");
  const std::string k = key.empty() ? c.all_hardware().front().key : key;
  try {
    (void)c.hardware(k);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what() + " (" + what + ")");
  }
  return {std::move(c), k};
}

}  // namespace

Resimulation resimulate_fidelity(const ResimulateOptions& o) {
  const auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  const fs::path dir(o.dir);
  SavedFidelityRun saved = read_fidelity_json((dir / "fidelity.json").string());
  Resimulation out;
  out.options = saved.options;
  out.options.progress = o.progress;
  out.options_saved = saved.options_saved;
  out.report = std::move(saved.report);
  FidelityReport& r = out.report;
  if (!out.options_saved) {
    const FidelityOptions defaults;
    say(fmt::format("the file keeps no options (written before 2026-12-07): its cases are rebuilt from the defaults "
                    "(--max-num-seqs {}, --kv-blocks {}, --seed {}) and checked against it",
                    defaults.max_num_seqs, defaults.kv_blocks, defaults.seed));
  }
  if (r.drift_corrected) say("the run was drift-corrected: each case is simulated with its saved slowdown again");

  sim::Catalogue catalogue;
  // A catalogue given here, or the one the run was given (--hardware), read afresh.
  const std::string given = !o.hardware_catalogue.empty() ? o.hardware_catalogue : out.options.hardware_catalogue;
  if (!given.empty()) {
    const std::string key = !o.hardware_catalogue.empty() ? o.hardware_key : r.hardware_key;
    const std::string what = !o.hardware_catalogue.empty() ? "--hardware" : "the catalogue the run was given";
    r.calibration_toml = read_text(given, what);
    std::tie(catalogue, r.hardware_key) = catalogue_entry(r.calibration_toml, given, key, what);
    out.hardware_source = "the catalogue " + given + ", entry " + r.hardware_key +
                          (o.hardware_catalogue.empty() ? " (the run's --hardware)" : "");
    out.options.hardware_catalogue = given;
    out.options.hardware_key = r.hardware_key;
    if (o.fit_overlap) say("--fit-overlap / --no-fit-overlap ignored: nothing is refitted on a given catalogue");
  } else {
    const fs::path written = dir / "hardware.toml";
    const std::string text = read_text(written, "the run's calibration; a run given --hardware before 2026-12-07 "
                                                "kept none: give the same catalogue again with --hardware");
    std::tie(catalogue, r.hardware_key) =
        catalogue_entry(text, written.string(), r.hardware_key, "the run's calibration");
    // A copy: `catalogue` is replaced below.
    const sim::Hardware entry = catalogue.hardware(r.hardware_key);
    // The run's calibration fitted the architecture read off its model file; the saved
    // measurements describe the default model's only when that was the file.
    const bool default_model = out.options.model_path.empty();
    if (r.calibration.empty() || !default_model) {
      r.calibration_toml = text;
      if (o.fit_overlap) say("--fit-overlap / --no-fit-overlap ignored: the run's catalogue is used as written");
      out.hardware_source = written.string() + " as the run wrote it (" +
                            (r.calibration.empty() ? std::string("the file keeps no calibration measurements")
                                                   : "the run measured " + out.options.model_path +
                                                         ", whose architecture the file does not keep") +
                            ")";
    } else {
      // The measurements refitted as calibrate fits them, and the entry written and read back as
      // the run's was (rates to 6 significant digits), the measured figures kept from it. The
      // architecture the cases are simulated with; its bytes per weight as calibrate read them
      // off the loaded model (the preset's agree to 1e-6), so that the refit's inputs are the run's.
      sim::ModelPreset preset = sim::Catalogue::builtin().model(fidelity_model_preset);
      preset.weight_bytes = r.calibration.bytes_per_weight;
      // As the run fitted, unless told: files written before the options kept fit_overlap came
      // from builds that always fitted it, and their entry's overlap then shows it.
      const bool fit_overlap = o.fit_overlap.value_or(out.options.fit_overlap || entry.memory_overlap > 0);
      out.options.fit_overlap = fit_overlap;
      CalibrationFit fit = fit_calibration(preset, 1, r.calibration.block_size, r.calibration.repeats,
                                           r.calibration.points, r.calibration.read_bytes_per_s, fit_overlap);
      fit.hardware.key = entry.key;
      fit.hardware.name = entry.name;
      fit.hardware.link = entry.link;
      fit.hardware.memory_bytes = entry.memory_bytes;
      fit.hardware.step_overhead = entry.step_overhead;
      fit.median_pass_spread = median_pass_spread(fit.points);
      Calibration c;
      c.model_path = "(refitted from " + (dir / "fidelity.json").string() + ")";
      c.model = preset;
      c.read_bytes_per_s = r.calibration.read_bytes_per_s;
      c.memory_bytes = entry.memory_bytes;
      c.fits.push_back(fit);
      r.calibration_toml = hardware_catalogue_toml(c);
      catalogue = sim::Catalogue::parse(r.calibration_toml, "(refitted)", sim::embedded_model_catalogue,
                                        "(embedded models)");
      out.saved_fit_rms_relative_error = rms_over(preset, entry, r.calibration);
      out.hardware_source = fmt::format(
          "the run's calibration ({} shapes) refitted by this build: rms relative error {:.2f} % (the run's own "
          "entry over the same measurements: {:.2f} %)",
          r.calibration.points.size(), 100 * fit.rms_relative_error, 100 * out.saved_fit_rms_relative_error);
      out.refit = std::move(fit);
    }
  }
  say("simulating on " + out.hardware_source);
  score_fidelity(out.options, catalogue, r);
  return out;
}

}  // namespace actorlm::bench
