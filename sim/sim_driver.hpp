#pragma once
// The simulator's client: one actor that submits a workload's requests at their arrival times
// (open loop) or as its clients' previous ones finish (closed loop), and is every request's token
// sink. simulate() runs it on CAF's test coordinator (virtual time), simulate_wall() on a real
// actor system against the engine `actorlm serve` would build. Internal to sim/.
#include "actors/scheduler/scheduler_protocol.hpp"
#include "sim/metrics.hpp"
#include "sim/workload.hpp"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace actorlm::sim::detail {

// What the driver fills in; owned by the caller of spawn_driver. The driver writes it from its
// actor's thread; `done` and `drained` may be read from another while it runs, the rest once
// `drained` is true.
struct Run {
  std::vector<WorkloadRequest> workload;
  std::vector<RequestTiming> timings;         // index = request id - 1
  std::vector<scheduler::StepRecord> steps;   // relative times
  std::atomic<std::size_t> done{0};           // finished or refused
  std::uint64_t refused = 0;                  // submissions answered queue_full, too_long or invalid
  std::uint64_t too_long = 0;                 // of those, too_long
  std::uint64_t invalid = 0;                  // of those, invalid (the driver built a request the
                                              // scheduler refuses: a bug, reported as one)
  std::uint64_t unavailable = 0;              // submissions refused by a failed engine
  std::uint64_t errored = 0;                  // requests the engine ended with an error
  std::string first_error;                    // the engine's word for the first of them
  std::atomic<bool> drained{false};           // the final drains have answered
  // The driver stopped before the run's end (the scheduler died or failed to answer, the driver
  // itself failed): `stop_reason` says why, written before `stopped` is set.
  std::atomic<bool> stopped{false};
  std::string stop_reason;
};

// Spawns the driver: it submits its first requests at once (t0: the actor clock's now, in ns, that
// the run's times count from) and sets run->drained once every request is done and the
// scheduler's records are collected, or run->stopped when it cannot get there.
// `workload` says whether the arrivals are a closed loop (run->workload holds the requests).
caf::actor spawn_driver(caf::actor_system& sys, Run* run, scheduler::scheduler_actor scheduler, std::int64_t t0,
                        std::uint32_t vocab, const WorkloadSpec& workload);

// The progress bar simulate() draws on stderr; `t_s` is simulated time, or with `wall` elapsed.
void print_progress(const std::string& label, std::size_t done, std::size_t total, double t_s, bool wall = false);

}  // namespace actorlm::sim::detail
