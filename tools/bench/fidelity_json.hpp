#pragma once
// bench fidelity's saved run, fidelity.json in --out's directory, written and read back: the
// figures ("summary", also the command's last JSON line), the options the cases were built with
// ("options"), every case's measured rounds and simulated figures ("cases"), and the
// calibration's measurements ("calibration": each shape's time in each pass, the read bandwidth),
// so that `bench fidelity --resimulate DIR` can simulate the same cases again, on a cost model
// refitted by this build or on another catalogue, without measuring anything.

#include "tools/bench/fidelity.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace actorlm::bench {

// The figures, as the command's last line prints them.
nlohmann::json fidelity_summary_json(const FidelityReport&);
// The whole document.
nlohmann::json fidelity_json(const FidelityReport&, const FidelityOptions&);

struct SavedFidelityRun {
  // As the run had them: max_num_seqs, kv_blocks, seed, quick and model_path (the cases are
  // built from them), rounds, hardware_catalogue and hardware_key, interleave, fit_overlap and
  // drift_correction; files written before 2026-12-07 hold none, and read as the defaults (the
  // later keys read as the defaults where absent).
  FidelityOptions options;
  bool options_saved = false;
  // The cases with their rounds and each figure's median over them (FidelityResult::measured),
  // the hardware key, the calibration's measurements (empty in files written before 2026-12-07
  // and with --hardware), the machine's drift, whether the passes were interleaved, their spread.
  // Nothing simulated: score_fidelity fills that in.
  FidelityReport report;
};

// Reads a fidelity.json. Throws std::runtime_error naming the file and the field when it cannot
// be read, is not JSON, or lacks a field, and when its cases are not the ones its options build.
SavedFidelityRun read_fidelity_json(const std::string& path);

}  // namespace actorlm::bench
