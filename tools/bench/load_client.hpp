#pragma once
// An event-driven HTTP/1.1 load client (Boost.Asio and Beast, behind this header): the thread
// that calls run() drives every connection, thousands at once, with no thread per connection.
// Each request gets a connection of its own, closed after its answer, unless keep_alive is set
// (LoadClientOptions): then an answer the server lets stay open leaves its connection idle for
// the next request, as pooled clients (aiohttp, httpx) do. Answers with
// `Content-Type: text/event-stream` are read as Server-Sent Events (actors/http/sse_parser.hpp),
// each event's data kept with the time its bytes arrived (steady_clock, which is
// CLOCK_MONOTONIC on Linux: comparable across the processes of one machine; see SseEvent);
// other answers keep their body. A request can also be cut short on purpose: the connection closed after some
// events (an aborted stream), or right after the request is sent (a client that left before the
// answer). Apart from the SSE parser nothing of actorlm is used: any HTTP/1.1 server will do.
//
// Threading: a LoadClient belongs to one thread at a time; callbacks run on the thread inside
// run(), one at a time. Not for TLS.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorlm::bench {

struct Endpoint {
  std::string host = "127.0.0.1";  // a numeric address or a name (resolved once)
  std::uint16_t port = 0;
};

// One HTTP exchange.
struct LoadRequest {
  std::string method = "POST";
  std::string target = "/v1/completions";
  std::string body;  // sent with Content-Type: application/json when not empty
  std::vector<std::pair<std::string, std::string>> headers;  // more headers (Authorization...)
  std::int64_t close_after_events = -1;  // close once this many SSE events arrived (-1: never)
  bool close_after_send = false;         // close as soon as the request is written
  std::chrono::milliseconds timeout{300'000};  // the whole exchange, connect included
  std::int64_t release_ns = 0;           // steady_clock ns: the exchange starts no earlier (a
                                         // timer, not a thread); 0 or past: at once. Open-loop
                                         // arrivals: hand run() every request with its time.
  std::uint64_t tag = 0;                 // the caller's, copied into the result
};

enum class LoadOutcome {
  complete,  // the whole answer arrived (any status: read status and body)
  closed,    // closed by this client, as the request asked
  failed,    // no complete answer: connect error, timeout, or the server closed early
};
const char* to_string(LoadOutcome);

// Times are steady_clock nanoseconds. arrival_ns is the kernel's receive time of the last TCP
// segment of the read that completed the event (SO_TIMESTAMPNS; read_ns without it): when the
// server's bytes reached this machine's socket, however busy this client's one thread was.
// read_ns is when this client read them; read_ns - arrival_ns is the client's own lag.
struct SseEvent {
  std::int64_t arrival_ns = 0;
  std::int64_t read_ns = 0;
  std::string data;  // the payload ("[DONE]" included)
};

struct LoadResult {
  std::uint64_t tag = 0;
  LoadOutcome outcome = LoadOutcome::failed;
  std::string error;        // why, for `failed`
  int status = 0;           // 0 when no header arrived
  std::string request_id;   // the X-Request-Id header, if any
  std::int64_t start_ns = 0;   // steady_clock: when the exchange began (before connecting;
                               // after release_ns)
  std::int64_t header_ns = 0;  // the header's arrival (as SseEvent::arrival_ns)
  std::int64_t end_ns = 0;     // when the exchange ended here
  bool reused = false;         // sent on a connection an earlier exchange left open
  std::vector<SseEvent> events;  // event-stream answers
  std::string body;              // other answers
};

struct LoadClientOptions {
  Endpoint endpoint;
  std::uint32_t max_connecting = 256;  // connects in progress at once (a burst past the
                                       // server's accept backlog waits for SYN retries)
  bool kernel_timestamps = true;       // SO_TIMESTAMPNS arrival times (see SseEvent)
  // HTTP/1.1 keep-alive: a complete answer that the server does not close leaves its connection
  // idle, and the next exchange takes an idle one before it opens another (requests closed on
  // purpose never take one). A request on a reused connection that the server had closed, found
  // before any of the answer came, is sent again once on a new connection.
  bool keep_alive = false;
};

class LoadClient {
 public:
  explicit LoadClient(LoadClientOptions);
  ~LoadClient();
  LoadClient(LoadClient&&) noexcept;  // not while run() or open_slow() is running
  LoadClient& operator=(LoadClient&&) noexcept;

  // Keeps up to `concurrency` exchanges going: whenever one ends its result goes to `on_result`
  // and `next` is asked for another; once `next` returns nullopt no more start, and run()
  // returns when the last one has ended. An exchange waiting for its release_ns holds its slot. Throws std::runtime_error if the host does not resolve.
  void run(std::uint32_t concurrency, const std::function<std::optional<LoadRequest>()>& next,
           const std::function<void(LoadResult)>& on_result);
  // All of `requests` at once; results in the order of `requests`.
  std::vector<LoadResult> run_all(std::vector<LoadRequest> requests);

  // Opens `count` more "slow" connections, each sending the first lines of a request's header
  // and then nothing, and holds them until close_slow(). Returns how many are held now.
  std::size_t open_slow(std::size_t count);
  // Slow connections the server has not closed (nor answered); the closed ones are dropped.
  std::size_t slow_still_open();
  void close_slow();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace actorlm::bench
