#pragma once
// `actorlm bench soak`: a long mixed load, to show that nothing leaks. The server runs in this
// process on the sim backend in wall-clock mode; the load comes from a separate process (one
// LoadClient thread, load_commands.hpp's "soak"): streamed and non-streamed completions and
// chat completions, some streams closed mid-way, some connections closed right after the
// request. After the load, the engine must drain to zero KV blocks in use and no request in
// flight; resident memory is read before and after.

#include "actors/config/config.hpp"
#include "tools/bench/load_commands.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace actorlm::bench {

struct SoakOptions {
  config::Config config;  // a sim config in wall-clock mode; see default_serve_bench_config()
  double seconds = 60;
  std::uint32_t concurrency = 64;  // requests at a time
  std::uint32_t max_tokens = 64;   // per request at most (each draws from [4, max_tokens])
  std::uint64_t seed = 1;
  std::uint32_t caf_threads = 0;   // CAF scheduler threads (0: CAF's default, 4)
  std::vector<std::string> client_command;  // empty: default_client_command()
  std::function<void(const std::string&)> progress;
};

struct SoakResult {
  std::string served;
  int client_pid = 0;
  double seconds = 0;              // of load
  SoakCounts counts;
  bool drained = false;            // no request in flight and no KV block in use, in time
  double drain_seconds = 0;        // after the load, until drained (or the wait gave up)
  std::uint64_t blocks_in_use_at_end = 0;  // device and host KV blocks held by sequences
  std::uint64_t sequences_at_end = 0;      // sequences the block manager still knows
  std::uint64_t in_flight_at_end = 0;      // HTTP requests still being answered
  std::uint64_t rss_start_kib = 0, rss_end_kib = 0;  // this process, before and after the load
  std::uint64_t rss_first_progress_kib = 0;  // at the first progress report, ~10 s in (0: none)
  bool ok() const { return drained && blocks_in_use_at_end == 0 && counts.lost == 0; }
};

SoakResult run_soak_bench(const SoakOptions&);

}  // namespace actorlm::bench
