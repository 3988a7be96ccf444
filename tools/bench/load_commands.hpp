#pragma once
// The client side of the benchmarks whose clients run out of process (client_process.hpp):
// `actorlm bench load-client` reads one JSON command per line on stdin, runs it with one
// LoadClient (one thread), and answers in JSON lines on stdout until its stdin ends. Every
// command names the server: "host" (default 127.0.0.1) and "port".
//
//   {"cmd":"streams","port":P,"n":N,"body":{...}}
//       N copies of the completion `body` (it should ask for "stream": true) at once. One line
//       per stream, {"stream":i,"request_id":"..","status":200,"outcome":"complete","failure":"",
//       "done":true,"token_ns":[...]}, then {"end":"streams","seconds":S,"client_cpu_s":C,
//       "client_lag_us_p50":L,"client_lag_us_p99":L}. token_ns holds one arrival time
//       (SseEvent::arrival_ns) per token, counting a chunk's text as one token per space-led
//       word: what the sim backend's codec writes (" w17 w3 ..."); the lag is read_ns -
//       arrival_ns per token; C is this process's CPU time over the command.
//   {"cmd":"health","port":P,"slow":K,"samples":M}
//       Holds K slow connections (half-sent headers; those the server closes are opened again
//       before each sample) and times M GET /health one after another:
//       {"end":"health","health_ms":[...],"status":[...],"slow_held":[...]}.
//   {"cmd":"soak","port":P,"model":NAME,"seconds":S,"concurrency":C,"max_tokens":T,"seed":X}
//       Mixed load for S seconds, C requests at a time (see soak_mix in the .cpp): streamed and
//       non-streamed completions and chat completions, some streams closed mid-way, some
//       connections closed right after the request. {"progress":{...}} about every 10 s and
//       {"end":"soak",...} with the counts: sent = finished + errored + aborted + disconnected
//       + lost, where lost is an exchange that failed without this client closing it.
//
// An unknown command or a malformed line is answered {"error":"..."}.

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <iosfwd>

namespace actorlm::bench {

// The soak's counts: sent = finished + errored + aborted + disconnected + lost.
struct SoakCounts {
  std::uint64_t sent = 0;
  std::uint64_t finished = 0;      // a whole answer, 200
  std::uint64_t errored = 0;       // an error status, or an error event in the stream
  std::uint64_t aborted = 0;       // streams the client closed mid-way, as planned
  std::uint64_t disconnected = 0;  // connections the client closed right after the request
  std::uint64_t lost = 0;          // anything else: no answer, a stream cut short by the server
};
// As the soak's lines carry them, with "seconds" (of load so far).
nlohmann::json soak_counts_json(const SoakCounts&, double seconds);
// Throws nlohmann::json::exception when a count is missing.
SoakCounts soak_counts_from(const nlohmann::json&);

// Returns the process exit code: 0 at the end of the input.
int run_load_commands(std::istream& in, std::ostream& out);

}  // namespace actorlm::bench
