#pragma once
// `actorlm bench client`: a simulator workload (sim/workload.hpp) sent to any OpenAI-compatible
// server with the event-driven LoadClient (one thread), measured per request as the simulator
// records its own (sim::RequestTiming), so that sim/metrics and sim/report summarise both alike.
//
// Each request is a streamed POST /v1/completions: a prompt of the asked input length
// (prompt_builder.hpp), max_tokens = min_tokens = the asked output length, ignore_eos, and
// stream_options.include_usage; a request that stops early (a workload's max_tokens above its
// length) is sent max_tokens = its cap and sim::early_stop_token's fields instead, as the
// simulator sends it. A 400 whose body names one of the optional fields (ignore_eos, min_tokens,
// stream_options, stop_token_ids, logit_bias) drops that field for the rest of the run, with a
// warning, and the request is sent again (without min_tokens, stop_token_ids or logit_bias,
// requests ask for their own length). Arrivals: closed-loop workloads keep `clients` requests going (the
// think time as a release delay); open-loop ones (Poisson, gamma, trace) release each request
// at its arrival time, measured from then (a late client does not hide a slow server).
//
// Per request, from the kernel's receive times of the SSE events (load_client.hpp):
//   arrival = release (open loop) or start (closed loop); first token = the first event with
//   text; token times = every event with text (a chunk carrying several tokens is one ITL gap);
//   finished = the [DONE] event; output tokens = usage.completion_tokens, else events with text.
// Completed: status 200, [DONE] seen, no error event. Anything else is counted under one kind.

#include "sim/metrics.hpp"
#include "sim/workload.hpp"
#include "tools/bench/load_client.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace actorlm::bench {

class PromptBuilder;

// http://HOST[:PORT][/PATH]: PATH empty or "/" -> /v1/completions, ending in /v1 -> PATH +
// /completions, else PATH as given. Throws std::invalid_argument naming what is wrong (https:
// not supported).
struct ServerUrl {
  Endpoint endpoint;
  std::string target;  // the completions endpoint
  std::string models;  // its sibling /v1/models
};
ServerUrl parse_server_url(const std::string& url);

struct ClientBenchOptions {
  ServerUrl server;
  std::string model;    // the "model" field; empty: the first id GET /v1/models lists
  std::string api_key;  // sent as Authorization: Bearer, when set
  bool ignore_eos = true;
  bool keep_alive = false;  // LoadClientOptions::keep_alive
  std::uint32_t max_connections = 10'000;  // open-loop exchanges at once (waiting ones included)
  std::chrono::milliseconds timeout{600'000};  // per request
  std::function<void(std::size_t done, std::size_t total)> progress;  // after each request
  std::function<void(const std::string&)> warn;                      // one line each
};

struct ClientRun {
  std::vector<sim::RequestTiming> requests;   // in workload order, id = index + 1
  std::map<std::string, std::uint64_t> errors;  // kind ("HTTP 503", "timeout", ...) -> requests
  std::uint64_t short_outputs = 0;  // completed with fewer output tokens than asked
  std::uint64_t long_outputs = 0;   // completed with more (a request that was to stop early did not)
  std::uint64_t retried = 0;        // sent again without a field the server refused
  std::uint64_t reused = 0;         // answered on a connection an earlier request left open
  double wall_s = 0;                // s: first release to the last answer
  double cpu_s = 0;                 // s: this process's CPU time (getrusage) over the run
  std::size_t peak_streams = 0;     // most exchanges open at once
  double lag_us_p50 = 0, lag_us_p99 = 0;  // read time - kernel arrival time per event
};

// The model id a server lists first; throws std::runtime_error when it answers none.
std::string first_listed_model(const ServerUrl& server, const std::string& api_key);

// Sends `requests` (as sim::generate made them; arrival_ns ignored for closed loop) and
// measures them. `closed_loop`: the clients and think time, or nullopt for open loop.
ClientRun run_client_workload(const std::vector<sim::WorkloadRequest>& requests,
                              const std::optional<sim::ClosedLoopArrivals>& closed_loop,
                              PromptBuilder& prompts, const ClientBenchOptions& options);

}  // namespace actorlm::bench
