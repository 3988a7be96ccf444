#pragma once
// `bench fidelity --resimulate DIR`: an earlier run's measured cases (DIR/fidelity.json, written
// with --out DIR) simulated again by this build, without measuring anything: a change to the cost
// model, its fit or the scheduler is scored against saved measurements in seconds instead of a
// quarter of an hour, and against several runs at once.
//
// The hardware: a catalogue given here; else the one the run was given (its --hardware, read
// afresh); else the run's calibration refitted by this build's `calibrate` fit from the
// measurements the file keeps (each shape's time in each pass, the read bandwidth; the engine's
// own time per step and the entry's other measured figures from DIR/hardware.toml), written as a
// catalogue and read back as the run's own was, so that an unchanged build reproduces the run's
// figures exactly; or, for files that keep no measurements (written before 2026-12-07) or whose
// run measured another model file than the default (whose architecture they do not keep),
// DIR/hardware.toml as it was written. A drift-corrected run's cases keep their slowdowns.

#include "tools/bench/calibrate.hpp"
#include "tools/bench/fidelity.hpp"

#include <functional>
#include <optional>
#include <string>

namespace actorlm::bench {

struct ResimulateOptions {
  std::string dir;                 // the earlier run's --out directory
  std::string hardware_catalogue;  // a catalogue to simulate on; empty: as above
  std::string hardware_key;        // its entry (default: the first)
  // Whether the refit fits memory_compute_overlap; unset: as the run's calibration did (its
  // options say; files from before they did: its entry's overlap above 0).
  std::optional<bool> fit_overlap;
  std::function<void(const std::string&)> progress;
};

struct Resimulation {
  // The run's (its cases are built from them), with the hardware as re-simulated: the catalogue
  // used when one was given, fit_overlap as refitted, so that a re-simulation's own record
  // re-simulates alike.
  FidelityOptions options;
  bool options_saved = true;  // false: a file without them, read with the defaults
  FidelityReport report;    // the run's measurements, simulated again
  std::string hardware_source;  // where the hardware came from, in words
  std::optional<CalibrationFit> refit;  // the refit, when there was one
  double saved_fit_rms_relative_error = 0;  // the run's own catalogue entry over the same measurements
};

// Throws std::runtime_error naming the file and what is wrong when DIR holds no readable run or
// the catalogue cannot be read.
Resimulation resimulate_fidelity(const ResimulateOptions&);

}  // namespace actorlm::bench
