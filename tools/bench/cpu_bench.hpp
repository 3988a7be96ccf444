#pragma once
// `actorlm bench cpu`: output tokens per second of the cpu backend on a real model through the
// whole engine, at several numbers of concurrent requests (closed loop: each client submits
// its next request when the last one finishes), against the same requests run one at a time
// by a plain generate loop over the same forward (no engine, no batching: how HF `generate`
// serves them). Greedy decoding, every request generating exactly max_tokens tokens.

#include "actors/config/config.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace actorlm::bench {

struct CpuBenchOptions {
  config::Config config;                          // backend cpu; model.path empty: default model
  std::uint32_t requests = 32;
  std::uint32_t max_tokens = 32;
  std::vector<std::uint32_t> concurrency = {1, 8, 32};
  bool sequential_baseline = true;
  std::function<void(const std::string&)> progress;
};

struct CpuBenchPoint {
  std::uint32_t concurrency = 0;
  double tokens_per_s = 0;
  double seconds = 0;
  double median_ttft_s = 0;
};

struct CpuBenchResult {
  std::string model;
  std::vector<CpuBenchPoint> engine;  // one per concurrency
  double sequential_tokens_per_s = 0;
  double sequential_seconds = 0;
  std::uint64_t prompt_tokens = 0;    // over the requests
};

CpuBenchResult run_cpu_bench(const CpuBenchOptions&);

}  // namespace actorlm::bench
