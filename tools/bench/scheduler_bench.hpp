#pragma once
// `actorlm bench scheduler`: wall time of one whole iteration of the real engine actors
// (plan, block-manager round trip, execute round trip to zero-cost shards, token delivery)
// under the normal CAF scheduler. Reported, never asserted.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace actorlm::bench {

struct SchedulerBenchOptions {
  std::vector<std::uint32_t> running = {256, 1024};  // concurrent sequences measured
  std::uint32_t steps = 300;                         // decode iterations measured per size
  std::uint32_t threads = 2;                         // CAF scheduler threads
  std::function<void(const std::string&)> progress;
};

struct SchedulerBenchPoint {
  std::uint32_t running = 0;
  double step_overhead_us = 0;  // median over the measured decode iterations
  double p90_us = 0;
  // The policies alone, on one thread without actors (Scheduler::plan, apply_reservation,
  // on_reserved, on_executed): median per decode step. step_overhead_us minus this is messaging.
  double policy_step_us = 0;
  std::uint32_t steps = 0;
  std::uint64_t step_bytes = 0;  // one decode step's Step message, serialized for the network
  std::uint64_t step_bytes_full_format = 0;  // the same step as the protocol before deltas sent it
};

std::vector<SchedulerBenchPoint> run_scheduler_bench(const SchedulerBenchOptions&);

}  // namespace actorlm::bench
