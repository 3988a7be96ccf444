#pragma once
// `actorlm bench cpu`: output tokens per second of the cpu backend on a real model through the
// whole engine, at several numbers of concurrent requests (closed loop: each client submits
// its next request when the last one finishes), against the same requests run one at a time
// by a plain generate loop over the same forward (no engine, no batching: how HF `generate`
// serves them). Greedy decoding, every request generating exactly max_tokens tokens.
//
// Each weights path (model.weights "stored" and "f32"), under each KV cache dtype asked for
// (cache.dtype "f16", "f32"), is measured in the same run, side by side, with: the KV blocks
// the cache holds, the bytes of weights one decode step reads, the decode steps' rate of the plain
// loop alone, one prefill of `prefill_tokens` tokens, one layer's decode attention over 1,024
// cached positions, and the machine's read bandwidth measured on the same threads (a buffer much
// larger than the last-level cache) just before the plain loops. The paths' engines are loaded
// together and each concurrency is measured on them one after the other, so that the ratios
// between paths compare runs close in time on a shared machine.

#include "actors/config/config.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace actorlm::bench {

constexpr std::uint32_t decode_attention_positions = 1024;

struct CpuBenchOptions {
  config::Config config;                          // backend cpu; model.path empty: default model
  std::uint32_t requests = 32;                    // per measurement, at least the concurrency
  std::uint32_t max_tokens = 32;
  std::vector<std::uint32_t> concurrency = {1, 8, 32, 64};
  bool sequential_baseline = true;
  std::vector<config::CpuWeights> weights = {config::CpuWeights::stored, config::CpuWeights::f32};
  std::vector<config::CacheDtype> kv_dtypes;      // empty: config.cache.dtype alone
  std::uint32_t prefill_tokens = 512;             // 0: no prefill measurement
  std::uint32_t repeats = 3;                      // of the prefill and bandwidth measurements (median)
  std::function<void(const std::string&)> progress;
};

struct CpuBenchPoint {
  std::uint32_t concurrency = 0;
  std::uint32_t requests = 0;
  double tokens_per_s = 0;
  double seconds = 0;
  double median_ttft_s = 0;
};

// One weights path with one KV cache dtype.
struct CpuBenchPath {
  config::CpuWeights weights = config::CpuWeights::stored;
  config::CacheDtype kv_dtype = config::CacheDtype::f16;
  std::uint32_t kv_blocks = 0;        // device blocks in cache.cpu_kv_space (or the override)
  std::vector<CpuBenchPoint> engine;  // one per concurrency
  double sequential_tokens_per_s = 0; // the plain loop, prefills included
  double sequential_seconds = 0;
  double decode_tokens_per_s = 0;     // the plain loop's decode steps alone (one token each)
  double prefill_tokens_per_s = 0;    // one prompt of prefill_tokens tokens, median
  double decode_attention_s = 0;      // one layer's attention, one decode row over
                                      // decode_attention_positions cached positions, median
  std::uint64_t weight_bytes_per_token = 0;  // matrices one decode step reads (rank 0, TP 1)
  std::uint64_t weight_bytes = 0;            // all the weights as held
};

struct CpuBenchResult {
  std::string model;
  std::uint64_t prompt_tokens = 0;    // over the requests
  double read_bytes_per_s = 0;        // memory read bandwidth, median
  std::int32_t threads = 0;           // of the bandwidth measurement
  std::vector<CpuBenchPath> paths;
};

CpuBenchResult run_cpu_bench(const CpuBenchOptions&);

// Memory read bandwidth: `threads` threads sum disjoint parts of a `bytes` buffer; median of
// `repeats` passes, in bytes per second.
double measure_read_bandwidth(std::int32_t threads, std::size_t bytes, std::uint32_t repeats);

}  // namespace actorlm::bench
