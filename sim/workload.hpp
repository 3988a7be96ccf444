#pragma once
// Workloads for the simulator: how many requests, how long their prompts and answers are, and
// when they arrive. Plain C++ (no CAF). Generation is deterministic for a seed on every standard
// library: std::mt19937_64's output is fixed by the standard, the distributions are ours
// (inverse CDF, Box–Muller, Marsaglia–Tsang), since std:: distributions are not.

#include "actors/config/config.hpp"  // ConfigError: "FILE:LINE:COLUMN: KEY: MESSAGE"

#include <toml++/toml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace actorlm::sim {

// One request of a workload. For closed-loop workloads arrival_ns is 0: the driver releases a
// client's next request when its previous one finishes (plus the think time).
struct WorkloadRequest {
  std::int64_t arrival_ns = 0;      // ns since the run started
  std::uint32_t input_tokens = 1;   // tokens, >= 1
  std::uint32_t output_tokens = 1;  // tokens, >= 1: where the request ends
  // What the request asks for (0: output_tokens). Above output_tokens, the request stops early
  // at its length, as a real one stops at its end-of-sequence token, while an engine that
  // reserves memory reserves this much (see early_stop_token).
  std::uint32_t max_tokens = 0;
  bool operator==(const WorkloadRequest&) const = default;
};

// The max_tokens a request is sent with: its cap, never below its length.
inline std::uint32_t requested_max_tokens(const WorkloadRequest& r) {
  return r.max_tokens > r.output_tokens ? r.max_tokens : r.output_tokens;
}
inline bool stops_early(const WorkloadRequest& r) { return r.max_tokens > r.output_tokens; }

// How a request that stops early is asked to, in the OpenAI API's fields that vLLM and actorlm
// both honour, so that the simulator and `bench client` send the same request: max_tokens its
// cap, stop_token_ids [early_stop_token], min_tokens output_tokens - 1 (the stop token masked
// until then) and logit_bias {early_stop_token: early_stop_bias} (then drawn, all but surely:
// e^100 against the rest of the vocabulary). The stop token is its last output token.
inline constexpr std::int32_t early_stop_token = 0;
inline constexpr float early_stop_bias = 100;

// ---- lengths (tokens). Continuous draws are rounded to the nearest integer, then clamped. ----
inline constexpr std::uint32_t default_max_length = 1u << 20;  // tokens: clamp when none is given

struct FixedLength {
  std::uint32_t value = 128;  // tokens, >= 1
};
struct UniformLength {  // every integer in [min, max] equally likely
  std::uint32_t min = 1;  // tokens, >= 1
  std::uint32_t max = 1;  // tokens, >= min
};
struct NormalLength {
  double mean = 128;  // tokens, > 0
  double sd = 0;      // tokens, >= 0
  std::uint32_t min = 1;
  std::uint32_t max = default_max_length;
};
struct LogNormalLength {  // ln(length) ~ Normal(mu, sigma)
  double mu = 0;          // of ln(tokens)
  double sigma = 0;       // of ln(tokens), >= 0
  std::uint32_t min = 1;
  std::uint32_t max = default_max_length;
};
using LengthDistribution = std::variant<FixedLength, UniformLength, NormalLength, LogNormalLength>;

// The (mu, sigma) whose log-normal has this mean and standard deviation (before clamping):
// sigma^2 = ln(1 + sd^2 / mean^2), mu = ln(mean) - sigma^2 / 2.
LogNormalLength lognormal_from_mean_sd(double mean, double sd, std::uint32_t min,
                                       std::uint32_t max);

// ---- arrivals ----
struct PoissonArrivals {
  double rate = 1;  // requests/s, > 0; exponential inter-arrival times
};
struct GammaArrivals {  // gamma inter-arrival times: shape 1/burstiness, mean 1/rate
  double rate = 1;        // requests/s, > 0
  double burstiness = 1;  // squared coefficient of variation of the gaps, > 0; 1 = Poisson
};
struct ClosedLoopArrivals {  // C clients, each with one request in flight at a time
  std::uint32_t clients = 1;  // >= 1
  double think_time_s = 0;    // s between a client's finish and its next request, >= 0
};
struct TraceReplay {  // arrivals and lengths from a trace file (sim/trace.hpp)
  std::string path;                    // as resolved when it was loaded
  double speedup = 1;                  // arrival times divided by this, > 0
  std::vector<WorkloadRequest> rows;   // loaded, sorted by arrival, first at 0
};
using ArrivalProcess =
    std::variant<PoissonArrivals, GammaArrivals, ClosedLoopArrivals, TraceReplay>;

struct WorkloadSpec {
  std::uint32_t requests = 100;  // >= 1; with a trace: at most this many rows (0: all of them)
  LengthDistribution input = FixedLength{32};    // unused with a trace
  LengthDistribution output = FixedLength{128};  // unused with a trace
  ArrivalProcess arrival = PoissonArrivals{};
  // Every request's max_tokens (0: none, each asks for its own length). Outputs drawn (or
  // traced) longer are cut to it; shorter ones stop early (WorkloadRequest::max_tokens).
  std::uint32_t max_tokens = 0;
};

// The clients of a closed-loop workload; nullopt for open-loop ones (arrival times given).
std::optional<std::uint32_t> closed_loop_clients(const WorkloadSpec& spec);

// What is wrong with a spec built in code (parse_workload checks the same things); empty if valid.
std::vector<std::string> validate(const WorkloadSpec& spec);

// The requests, in arrival order. Throws std::invalid_argument when validate() finds a problem.
// A trace ignores the seed; the rest draw from std::mt19937_64(seed).
std::vector<WorkloadRequest> generate(const WorkloadSpec& spec, std::uint64_t seed);

// One line a person can read: "1000 requests; input fixed 32; output normal(mean 128, sd 32,
// [1, 512]); Poisson 2 req/s". Deterministic (numbers in shortest round-trip form).
std::string to_string(const LengthDistribution& length);
std::string to_string(const ArrivalProcess& arrival);
std::string to_string(const WorkloadSpec& spec);

// ---- TOML ----
struct WorkloadParse {
  WorkloadSpec spec;                         // meaningful only when ok()
  std::vector<config::ConfigError> errors;   // every problem found (a trace's: its first)
  bool ok() const { return errors.empty(); }
};

// Reads a workload table (schema at the top of sim/workload_toml.cpp). `key` is the
// table's dotted name, used in messages ("workload.input.mean: expected a number > 0, found -3").
// A trace is loaded here, so that its errors come with the scenario's; a relative trace path is
// taken from the directory of the TOML file the table came from. Unknown keys are errors.
WorkloadParse parse_workload(const toml::table& table, std::string_view key = "workload");

}  // namespace actorlm::sim
