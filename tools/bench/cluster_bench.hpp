#pragma once
// actorlm bench cluster: the cluster's own costs, measured with workers that the bench starts on
// loopback (this binary again: `actorlm worker`), side by side with the same engine in one
// process:
//   - the control plane's time per decode iteration at 256 sequences, with zero-cost sim shards
//     (a hardware entry whose every modelled step takes nanoseconds) on 2 workers, and in process;
//   - the bytes that cross the sockets per such iteration (the head's sockets, TCP_INFO);
//   - failover: a worker SIGKILLed under load, to the last request in flight ending with an
//     error; recovery: the worker restarted on its address, to the first request served;
//   - the cpu backend's two parallelisms of the default model, each with 3 ranks across two
//     worker processes against the same ranks in one process, tokens/s at 1 and 32 concurrent
//     requests: tensor parallel 3 (its 9 heads do not split over 2) and a layer split over 3
//     stages.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace actorlm::bench {

struct ClusterBenchOptions {
  std::uint32_t running = 256;      // sequences decoding in the overhead measurement
  std::uint32_t steps = 300;        // decode iterations measured
  std::uint32_t cpu_tokens = 48;    // tokens per request in the cpu comparison
  std::vector<std::uint32_t> concurrency = {1, 32};
  bool cpu = true;                  // run the cpu comparison (loads the default model)
  std::function<void(const std::string&)> progress;
};

struct ClusterCpuPoint {
  std::string parallelism;  // "tp3" or "pp3" (a layer split over 3 stages)
  std::uint32_t concurrency = 0;
  double one_process_tokens_per_s = 0;
  double two_processes_tokens_per_s = 0;
};

struct ClusterBenchResult {
  double remote_step_overhead_us = 0;   // median gap between decode iterations, ranks on 2 workers
  double remote_step_p90_us = 0;
  double local_step_overhead_us = 0;    // the same engine, ranks in this process
  double local_step_p90_us = 0;
  double step_bytes = 0;                // read by head and workers per decode iteration
  double failover_seconds = 0;
  double recovery_seconds = 0;
  std::vector<ClusterCpuPoint> cpu;
};

// Throws std::runtime_error when a worker does not start or a measurement cannot complete.
ClusterBenchResult run_cluster_bench(const ClusterBenchOptions& opt);

}  // namespace actorlm::bench
