#pragma once
// The floor under `bench serve`'s figures: what this machine's loopback TCP costs to deliver a
// step's tokens, with no engine and no HTTP server in the way. A SendFloor accepts n streaming
// requests (an HTTP/1.1 client sending Content-Length bodies, without `Expect: 100-continue`;
// bench serve uses its own client process, unchanged), answers each with an SSE header, and
// then, once per step, sends every connection one chunk the size and shape of the server's
// completion chunk, from `threads` threads that split the connections as the server's I/O
// threads do (connection i on thread i mod threads). Each step's start is recorded before the
// threads are woken, as the engine records a token before the server's I/O threads are woken; a
// token's arrival at the client minus its step's start is the floor's overhead, comparable with
// the server's. Only a wake-up and send() stand between the two: no lookup, no detokenizer, no
// JSON, no event loop. A server of this design (I/O threads woken by each step) does not beat
// it, and what separates the two is the server's own cost; it is a reference, not a bound: a
// server whose threads busy-polled would skip the wake-up.
//
// Plain POSIX sockets on purpose: the figure is the kernel's, and nothing else may add to it.
// Threading: one thread calls serve() at a time; it starts and joins the sender threads.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace actorlm::bench {

struct SendFloorRun {
  std::vector<std::int64_t> step_ns;  // each step's start, steady_clock nanoseconds
  std::uint32_t streams = 0;          // connections served
  std::uint32_t failed = 0;           // connections a send failed on (the client left)
  double send_cpu_s = 0;              // CPU time of the sender threads (their sends alone)
};

class SendFloor {
 public:
  // Listens on 127.0.0.1, on any free port. Throws std::runtime_error when it cannot.
  explicit SendFloor(unsigned threads);
  ~SendFloor();
  SendFloor(const SendFloor&) = delete;
  SendFloor& operator=(const SendFloor&) = delete;

  int port() const { return port_; }
  // Accepts n connections and reads each one's request (throws std::runtime_error when they
  // do not all come within `accept_timeout`), answers each with an SSE header (X-Request-Id:
  // its index from 1), then sends `steps` chunks (floor_chunk, naming `model`) to every
  // connection, a step every `interval` (the next at once when one overran), then "[DONE]" and
  // the end of the chunked body, and closes them. A connection whose client stops reading for
  // 10 s, or leaves, is counted failed and sent nothing more.
  SendFloorRun serve(std::uint32_t n, std::uint32_t steps, std::chrono::microseconds interval,
                     const std::string& model, std::chrono::seconds accept_timeout = std::chrono::seconds(60));

 private:
  unsigned threads_;
  int listener_ = -1;
  int port_ = 0;
};

// One chunk of a stream as the server writes it: the HTTP chunk framing around an SSE event
// whose data is a completion chunk (object "text_completion", one token " tok"; `id` is the
// stream's). Exposed for the tests.
std::string floor_chunk(std::uint32_t id, const std::string& model);

}  // namespace actorlm::bench
