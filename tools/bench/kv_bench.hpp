#pragma once
// `actorlm bench kv`: speed of the block manager's hot operations and KV slot utilization of
// paged against reserved allocation over a ShareGPT-like replay. Reported, never asserted.

#include "actors/kv/kv_types.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace actorlm::bench {

struct KvBenchOptions {
  std::uint32_t replay_requests = 10000;
  std::uint32_t replay_device_blocks = 4096;  // 65,536 token slots at block size 16
  std::uint32_t block_size = 16;
  std::uint32_t max_len = 2048;               // cap on prompt and on output lengths
  std::uint64_t seed = 1;
  std::function<void(const std::string&)> progress;  // one line per phase; may be empty
};

// One request of the replay: lengths drawn log-normal around ShareGPT's means.
struct ReplayRequest {
  std::uint32_t prompt_tokens = 0;
  std::uint32_t output_tokens = 0;
};

// Requests as ShareGPT-like lengths: log-normal, prompts around 160 tokens and outputs around
// 340 (vLLM paper, Table 1: ShareGPT means 161 in / 338 out), capped at max_len, at least 1.
std::vector<ReplayRequest> sharegpt_like(std::uint32_t n, std::uint32_t max_len, std::uint64_t seed);

struct ReplayResult {
  double utilization = 0;        // sum over steps of filled slots / sum of allocated slots
  std::uint64_t steps = 0;       // decode iterations until every request finished
  double mean_running = 0;       // sequences per step
  std::uint32_t max_running = 0;
  std::uint64_t preemptions = 0; // recompute preemptions when a step could not grow
};

// Offline replay: all requests wait at t = 0; every step admits FCFS while blocks allow, then
// appends one token to each running sequence (preempting the newest when out of blocks) and
// frees the finished ones. `reserve_tokens(r)` is what reserved mode reserves per request.
ReplayResult replay(kv::AllocationMode mode, const std::vector<ReplayRequest>& requests,
                    const KvBenchOptions& opt,
                    const std::function<std::uint32_t(const ReplayRequest&)>& reserve_tokens,
                    const std::function<void(std::uint32_t finished)>& on_progress);

struct KvBenchResult {
  double append_256_us = 0;          // median of one step's try_append (check, append, mark), 256 seqs
  double append_1024_us = 0;         // the same with 1,024 sequences
  double allocate_2k_prefix_us = 0;  // median match+check+allocate of 2,048 tokens, 1,024 cached
  ReplayResult paged;
  ReplayResult reserved;             // reserves prompt + max_len (the largest output allowed)
  ReplayResult reserved_oracle;      // reserves prompt + the true output (a lower bound on waste)
};

KvBenchResult run_kv_bench(const KvBenchOptions&);

}  // namespace actorlm::bench
