#pragma once
// Reports of one or several regimes side by side: an aligned text table, CSV and JSON.
// Output is byte-identical for identical input: numbers are formatted with std::to_chars
// (locale-free), fixed decimals in text and CSV, shortest round-trip form in JSON.

#include "sim/metrics.hpp"

#include <nlohmann/json_fwd.hpp>

#include <span>
#include <string>
#include <string_view>

namespace actorlm::sim {

struct RegimeResult {
  std::string name;  // "dynamic", "continuous", "paged", or any label
  Summary summary;
};

// `value` with exactly `decimals` digits after the point; "-0.000" is written "0.000".
std::string format_fixed(double value, int decimals);

// regime | throughput tok/s | req/s | p50/p90 latency s | TTFT p50/p90 s | TPOT p50/p90 ms |
// max batch | KV used max: a header, a rule, one row per regime; the regime column left-aligned,
// the rest right-aligned; every line ends with '\n'.
std::string summary_table(std::span<const RegimeResult> regimes);

// A header, then one row per regime with every scalar of Summary (regime first, then Summary's
// fields in declaration order, each Stats as _count,_mean,_p50,_p90,_p99,_max);
// latencies in s with 6 decimals, rates with 3, fractions with 4. Absent SLO thresholds and
// empty statistics are written as empty fields and 0 respectively.
std::string summary_csv(std::span<const RegimeResult> regimes);

// One row per request: regime,id,arrival_s,input_tokens,output_tokens,completed,ttft_s,tpot_s,
// e2e_s,queue_s,meets_slo (absent latencies empty). With `header`, the column names first, so
// several regimes concatenate into one file by passing header = false after the first.
std::string requests_csv(std::string_view regime, std::span<const RequestTiming> requests,
                         const Slo& slo, bool header = true);

// regime,t_s,batch_size,kv_used_fraction: every regime's time series, for external plotting.
std::string series_csv(std::span<const RegimeResult> regimes);

// Every field of a summary (Stats as {count, mean, p50, p90, p99, max}; absent SLO thresholds
// as null; series as [[t_s, batch_size, kv_used_fraction], ...]).
nlohmann::json summary_to_json(const Summary& summary);
// {"regimes": [{"name": ..., "summary": {...}}, ...]}
nlohmann::json report_to_json(std::span<const RegimeResult> regimes);
// report_to_json dumped with 2-space indentation and a final newline.
std::string report_json(std::span<const RegimeResult> regimes);

}  // namespace actorlm::sim
