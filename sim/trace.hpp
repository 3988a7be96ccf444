#pragma once
// Trace replay: request arrivals and lengths read from production traces.
//   azure_csv:      the Azure LLM inference traces (2023, 2024): a header naming at least
//                   TIMESTAMP,ContextTokens,GeneratedTokens, in any order, other columns ignored.
//                   TIMESTAMP is "2023-11-16 18:15:46.6805900" (up to 9 fractional digits, a 'T'
//                   also accepted) or a plain number of seconds.
//   mooncake_jsonl: the Mooncake traces: one JSON object per line with `timestamp` (ms),
//                   `input_length` and `output_length` (other fields ignored; blank lines skipped).
// Rows are sorted by time (stable) and arrivals made relative to the earliest one. Zero lengths
// (a request the trace recorded with no output, say) become 1 token and are counted; negative
// ones are errors. The first error stops the read and names file, line, column and field.

#include "actors/config/config.hpp"  // ConfigError
#include "sim/workload.hpp"          // WorkloadRequest

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::sim {

enum class TraceFormat : std::uint8_t { azure_csv, mooncake_jsonl };

std::string_view to_string(TraceFormat format);                      // "azure_csv", ...
std::optional<TraceFormat> trace_format_from_name(std::string_view name);
// From the extension: .csv -> azure_csv; .jsonl, .json -> mooncake_jsonl.
std::optional<TraceFormat> trace_format_from_path(std::string_view path);

struct TraceOptions {
  std::size_t limit = 0;  // keep at most this many rows (the earliest); 0: all
  double speedup = 1;     // arrival times divided by this, > 0 (2: twice the request rate)
};

struct TraceLoad {
  std::vector<WorkloadRequest> requests;    // sorted by arrival_ns, the first at 0
  std::size_t raised_to_one = 0;            // zero lengths made 1 token
  std::optional<config::ConfigError> error; // set: `requests` is empty
  bool ok() const { return !error.has_value(); }
};

// Parses trace text; `file` names it in errors.
TraceLoad parse_trace(std::string_view text, TraceFormat format, std::string_view file,
                      const TraceOptions& options = {});

// Reads and parses a file; `format` defaults to the one its extension names.
TraceLoad load_trace(const std::string& path, std::optional<TraceFormat> format = std::nullopt,
                     const TraceOptions& options = {});

}  // namespace actorlm::sim
