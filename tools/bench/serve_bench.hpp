#pragma once
// `actorlm bench serve`: what the HTTP front end adds to each token's latency. The server runs
// in this process on the sim backend in wall-clock mode (modelled GPU step times elapse for
// real, so the engine's token times are the "modelled" times); the streaming clients run in a
// separate process (client_process.hpp: one event-driven LoadClient thread) and read its SSE
// over loopback. Each token's arrival at the client's socket (the kernel's receive time, so
// that the one client thread's own queueing does not count) is compared with the time the
// engine produced it (the scheduler's record of that token; steady_clock in both processes,
// which is CLOCK_MONOTONIC on Linux). Per level, this process's CPU time (server and engine: nothing
// else runs here) is divided by the tokens streamed. Last, the client process holds slow
// connections (half-sent headers) while GET /health is timed. After each level, the same
// client runs it again against a SendFloor (send_floor.hpp): what this machine's loopback TCP
// alone costs to deliver those tokens, printed beside the server's figure.

#include "actors/config/config.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace actorlm::bench {

struct ServeBenchOptions {
  config::Config config;  // a sim config; see default_serve_bench_config()
  std::vector<std::uint32_t> streams = {1, 16, 64, 256, 1024};
  std::uint32_t max_tokens = 64;          // per stream
  double p99_limit_us = 1000;             // what "sustained" means
  std::uint32_t caf_threads = 0;          // CAF scheduler threads (0: CAF's default, 4)
  std::uint32_t slow_connections = 2000;  // held while /health is timed (0: not measured)
  std::uint32_t health_samples = 5;
  bool send_floor = true;                 // each level's send floor too (send_floor.hpp)
  std::vector<std::string> client_command;  // empty: default_client_command()
  std::function<void(const std::string&)> progress;
};

// A level's send floor (send_floor.hpp): the same streams and client, served by threads that do
// nothing but send() the chunks.
struct SendFloorPoint {
  bool measured = false;
  std::uint64_t tokens = 0;
  std::uint32_t failed = 0;
  double p50_us = 0, p99_us = 0, max_us = 0;  // a token's arrival minus its step's start
  double send_cpu_us_per_token = 0;           // the sender threads' CPU time per token
  double interval_us = 0;                     // its steps' spacing
  double client_cpu_s = 0;
};

struct ServeBenchPoint {
  std::uint32_t streams = 0;
  std::uint64_t tokens = 0;        // tokens joined with the engine's records
  std::uint32_t failed = 0;        // streams that did not end with [DONE]
  double overhead_p50_us = 0, overhead_p99_us = 0, overhead_max_us = 0;
  double seconds = 0;              // the level's wall time, first connect to last [DONE]
  double tokens_per_s = 0;
  double server_cpu_s = 0;         // this process's CPU time over the level
  double server_cpu_us_per_token = 0;
  double client_cpu_s = 0;         // the client process's CPU time over the level
  // How long after its arrival (the kernel's receive time) the client read each token: the
  // delay a client timing its own reads would have added to the overhead.
  double client_lag_p50_us = 0, client_lag_p99_us = 0;
  double step_interval_us = 0;     // the median time between a stream's tokens at the engine
  SendFloorPoint floor;            // when ServeBenchOptions::send_floor
};

struct ServeBenchResult {
  std::vector<ServeBenchPoint> points;
  std::uint32_t max_streams_sustained = 0;  // largest level with p99 under the limit (0: none)
  std::string served;                       // the server's description
  int client_pid = 0;                       // the client process
  // Measured only when slow_connections > 0:
  std::vector<double> health_ms;            // each GET /health, connect to answer
  std::vector<int> health_status;           // its HTTP status (0: no answer)
  std::vector<std::uint32_t> slow_held;     // slow connections open when each was sent
  double health_ms_median = 0;
};

// Falcon-40B on g5.48xlarge (TP 8), paged, wall clock, loopback on any free port.
config::Config default_serve_bench_config();
ServeBenchResult run_serve_bench(const ServeBenchOptions&);

}  // namespace actorlm::bench
