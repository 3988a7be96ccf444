// tools/bench/load_client.hpp: the benchmarks' event-driven HTTP client, against a scripted
// server on raw sockets (one thread per connection, each running the test's script).
#define BOOST_TEST_MODULE tools_bench_load_client
#include "tools/bench/load_client.hpp"

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace actorlm::bench;
using namespace std::chrono_literals;

// Reads until the end of a request's header (or EOF); returns what was read.
std::string read_header(int fd) {
  std::string got;
  char buf[4096];
  while (got.find("\r\n\r\n") == std::string::npos) {
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, std::size_t(n));
  }
  return got;
}

void send_all(int fd, const std::string& s) { ::send(fd, s.data(), s.size(), MSG_NOSIGNAL); }

// True once the client has closed the connection (within 5 s).
bool peer_closes(int fd) {
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  for (;;) {
    const auto n = ::recv(fd, &c, 1, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n < 0) return false;
  }
}

// Polls `done` for up to 5 s: the server's threads finish after the client is done.
bool eventually(const std::atomic<bool>& done) {
  for (int i = 0; i < 500 && !done; ++i) std::this_thread::sleep_for(10ms);
  return done;
}

std::string chunk(const std::string& s) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", s.size());
  return size + s + "\r\n";
}

const std::string sse_header =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nX-Request-Id: 42\r\n\r\n";

// Listens on 127.0.0.1 (any port); each connection runs `script(fd)` on a thread of its own.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<void(int)> script) : script_(std::move(script)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_REQUIRE(::listen(fd_, 128) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accepting_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;  // shut down
        std::lock_guard lock(mu_);
        connections_.emplace_back([this, c] {
          script_(c);
          ::close(c);
        });
      }
    });
  }
  ~ScriptedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    accepting_.join();
    for (auto& t : connections_) t.join();
    ::close(fd_);
  }
  LoadClient client(bool keep_alive = false) const {
    LoadClientOptions o{Endpoint{"127.0.0.1", port_}};
    o.keep_alive = keep_alive;
    return LoadClient(std::move(o));
  }

 private:
  std::function<void(int)> script_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread accepting_;
  std::mutex mu_;
  std::vector<std::thread> connections_;
};

LoadRequest post(std::string body = R"({"stream":true})") {
  LoadRequest r;
  r.body = std::move(body);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(streams_events_split_across_chunks_with_their_arrival_times_and_request_id) {
  std::string request;
  ScriptedServer server([&](int fd) {
    request = read_header(fd);
    send_all(fd, sse_header + chunk("data: one\n\nda"));
    std::this_thread::sleep_for(30ms);
    send_all(fd, chunk("ta: two\n\n"));
    std::this_thread::sleep_for(30ms);
    send_all(fd, chunk("data: [DONE]\n\n") + "0\r\n\r\n");
  });
  auto results = server.client().run_all({post()});
  const auto& r = results.at(0);
  BOOST_TEST(to_string(r.outcome) == "complete");
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.request_id == "42");
  BOOST_REQUIRE_EQUAL(r.events.size(), 3u);
  BOOST_TEST(r.events[0].data == "one");
  BOOST_TEST(r.events[1].data == "two");
  BOOST_TEST(r.events[2].data == "[DONE]");
  BOOST_TEST(r.events[1].arrival_ns - r.events[0].arrival_ns >= 20'000'000);  // the server's 30 ms pause
  BOOST_TEST(r.start_ns <= r.header_ns);
  BOOST_TEST(r.events[2].arrival_ns <= r.end_ns);
  BOOST_TEST(request.starts_with("POST /v1/completions HTTP/1.1\r\n"));
  BOOST_TEST(request.find("Content-Type: application/json\r\n") != std::string::npos);
  BOOST_TEST(request.find("Content-Length: 15\r\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(keeps_a_plain_answer_s_status_and_body) {
  ScriptedServer server([](int fd) {
    read_header(fd);
    send_all(fd, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"error\":1}");
  });
  LoadRequest get;
  get.method = "GET";
  get.target = "/nowhere";
  const auto r = server.client().run_all({get}).at(0);
  BOOST_TEST(to_string(r.outcome) == "complete");
  BOOST_TEST(r.status == 404);
  BOOST_TEST(r.body == "{\"error\":1}");
  BOOST_TEST(r.events.empty());
}

BOOST_AUTO_TEST_CASE(closes_a_stream_once_the_events_asked_for_arrived) {
  std::atomic<bool> closed{false}, done{false};
  ScriptedServer server([&](int fd) {
    read_header(fd);
    send_all(fd, sse_header + chunk("data: one\n\ndata: two\n\n"));
    closed = peer_closes(fd);
    done = true;
  });
  auto req = post();
  req.close_after_events = 1;
  const auto r = server.client().run_all({req}).at(0);
  BOOST_TEST(to_string(r.outcome) == "closed");
  BOOST_REQUIRE_EQUAL(r.events.size(), 1u);  // "two" came in the same read: not kept
  BOOST_TEST(r.events[0].data == "one");
  BOOST_TEST(eventually(done));
  BOOST_TEST(closed.load());
}

BOOST_AUTO_TEST_CASE(closes_right_after_sending_when_asked) {
  std::string request;
  std::atomic<bool> closed{false}, done{false};
  ScriptedServer server([&](int fd) {
    request = read_header(fd);
    closed = peer_closes(fd);
    done = true;
  });
  auto req = post();
  req.close_after_send = true;
  const auto r = server.client().run_all({req}).at(0);
  BOOST_TEST(to_string(r.outcome) == "closed");
  BOOST_TEST(r.status == 0);
  BOOST_TEST(eventually(done));
  BOOST_TEST(closed.load());
  BOOST_TEST(request.starts_with("POST /v1/completions"));
}

BOOST_AUTO_TEST_CASE(a_stream_the_server_cuts_short_has_failed) {
  ScriptedServer server([](int fd) {
    read_header(fd);
    send_all(fd, sse_header + chunk("data: one\n\n"));
  });
  const auto r = server.client().run_all({post()}).at(0);
  BOOST_TEST(to_string(r.outcome) == "failed");
  BOOST_TEST(r.events.size() == 1u);
  BOOST_TEST(!r.error.empty());
}

BOOST_AUTO_TEST_CASE(an_exchange_past_its_timeout_has_failed) {
  ScriptedServer server([](int fd) { peer_closes(fd); });
  auto req = post();
  req.timeout = 100ms;
  const auto r = server.client().run_all({req}).at(0);
  BOOST_TEST(to_string(r.outcome) == "failed");
  BOOST_TEST(r.error == "timed out");
}

BOOST_AUTO_TEST_CASE(run_keeps_the_concurrency_asked_for_until_next_has_no_more) {
  std::atomic<int> now{0}, most{0};
  ScriptedServer server([&](int fd) {
    read_header(fd);
    const int n = ++now;
    for (int m = most; n > m && !most.compare_exchange_weak(m, n);) {}
    std::this_thread::sleep_for(20ms);
    --now;
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  auto client = server.client();
  int asked = 0, answered = 0;
  client.run(
      4,
      [&]() -> std::optional<LoadRequest> {
        if (asked == 12) return std::nullopt;
        auto r = post("{}");
        r.tag = std::uint64_t(asked++);
        return r;
      },
      [&](LoadResult r) { answered += r.status == 200; });
  BOOST_TEST(answered == 12);
  BOOST_TEST(most.load() <= 4);
  BOOST_TEST(most.load() >= 2);
}

BOOST_AUTO_TEST_CASE(holds_slow_connections_and_drops_those_the_server_closes) {
  std::atomic<int> seen{0};
  ScriptedServer server([&](int fd) {
    char buf[256];
    const auto n = ::recv(fd, buf, sizeof buf, 0);  // the start of a header, no end
    BOOST_TEST(std::string(buf, std::size_t(std::max<ssize_t>(n, 0))).starts_with("POST /v1/completions HTTP/1.1\r\n"));
    if (++seen == 1) return;  // the first is closed at once
    peer_closes(fd);
  });
  auto client = server.client();
  BOOST_TEST(client.open_slow(3) == 3u);
  for (int i = 0; i < 100 && client.slow_still_open() != 2; ++i) std::this_thread::sleep_for(20ms);
  BOOST_TEST(client.slow_still_open() == 2u);
  client.close_slow();
  BOOST_TEST(client.slow_still_open() == 0u);
}

BOOST_AUTO_TEST_CASE(an_event_s_arrival_is_when_the_kernel_got_it_even_while_the_client_is_busy) {
  ScriptedServer server([](int fd) {
    const std::string request = read_header(fd);
    if (request.find("busy") != std::string::npos) {  // answered at once; its result keeps the client busy
      send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
      return;
    }
    std::this_thread::sleep_for(30ms);
    send_all(fd, sse_header + chunk("data: late\n\n") + "0\r\n\r\n");
  });
  auto client = server.client();
  std::vector<LoadRequest> reqs = {post(R"({"stream":true})"), post(R"({"busy":1})")};
  std::vector<LoadResult> results;
  client.run(
      2,
      [&]() -> std::optional<LoadRequest> {
        if (reqs.empty()) return std::nullopt;
        auto r = std::move(reqs.back());
        reqs.pop_back();
        return r;
      },
      [&](LoadResult r) {
        if (r.events.empty()) std::this_thread::sleep_for(200ms);  // the plain answer: busy
        results.push_back(std::move(r));
      });
  BOOST_REQUIRE_EQUAL(results.size(), 2u);
  const auto& stream = results[1];
  BOOST_REQUIRE_EQUAL(stream.events.size(), 1u);
  const auto& e = stream.events[0];
  BOOST_TEST(e.arrival_ns > stream.start_ns);
  BOOST_TEST(e.read_ns - e.arrival_ns > 100'000'000);  // read after the 200 ms pause, arrived before it
}

BOOST_AUTO_TEST_CASE(starts_each_exchange_at_its_release_time_and_times_it_from_there) {
  ScriptedServer server([](int fd) {
    read_header(fd);
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  const auto t0 = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch()).count();
  // Given out of order: each waits for its own time, holding its slot.
  const std::int64_t offsets_ms[] = {120, 0, 60};
  std::vector<LoadRequest> reqs;
  for (const auto ms : offsets_ms) {
    LoadRequest r;
    r.method = "GET";
    r.target = "/";
    r.release_ns = t0 + ms * 1'000'000;
    r.timeout = 1000ms;  // from the release: the 120 ms wait does not count against it
    reqs.push_back(r);
  }
  const auto results = server.client().run_all(reqs);
  for (std::size_t i = 0; i < results.size(); ++i) {
    BOOST_TEST(to_string(results[i].outcome) == "complete");
    BOOST_TEST(results[i].start_ns >= reqs[i].release_ns);
    // Not held back for ever (a loose bound: this is no timing test; a loaded machine may stall).
    BOOST_TEST(results[i].start_ns - reqs[i].release_ns < 1'000'000'000);
  }
}

namespace {

// `count` GETs, one at a time, on `client`.
std::vector<LoadResult> one_at_a_time(LoadClient& client, std::size_t count) {
  LoadRequest get;
  get.method = "GET";
  get.target = "/health";
  std::size_t sent = 0;
  std::vector<LoadResult> results;
  client.run(
      1, [&]() -> std::optional<LoadRequest> { return sent++ < count ? std::optional(get) : std::nullopt; },
      [&](LoadResult r) { results.push_back(std::move(r)); });
  return results;
}

}  // namespace

BOOST_AUTO_TEST_CASE(keep_alive_sends_the_next_requests_on_the_connection_an_answer_left_open) {
  std::atomic<int> accepted{0};
  ScriptedServer server([&](int fd) {
    ++accepted;
    while (read_header(fd).ends_with("\r\n\r\n")) send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  auto client = server.client(true);
  const auto results = one_at_a_time(client, 5);
  BOOST_REQUIRE_EQUAL(results.size(), 5u);
  for (std::size_t k = 0; k < results.size(); ++k) {
    BOOST_TEST(to_string(results[k].outcome) == "complete");
    BOOST_TEST(results[k].body == "ok");
    BOOST_TEST(results[k].reused == (k > 0));
  }
  BOOST_TEST(accepted == 1);
}

BOOST_AUTO_TEST_CASE(keep_alive_opens_a_new_connection_after_an_answer_that_closes_its_own) {
  std::atomic<int> accepted{0};
  ScriptedServer server([&](int fd) {
    ++accepted;
    read_header(fd);
    send_all(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok");
  });
  auto client = server.client(true);
  const auto results = one_at_a_time(client, 3);
  BOOST_REQUIRE_EQUAL(results.size(), 3u);
  for (const auto& r : results) {
    BOOST_TEST(to_string(r.outcome) == "complete");
    BOOST_TEST(!r.reused);
  }
  BOOST_TEST(accepted == 3);
}

BOOST_AUTO_TEST_CASE(a_request_on_a_kept_connection_the_server_closed_unanswered_goes_again_on_a_new_one) {
  // The first connection answers once, then takes the next request and closes without an answer
  // (a keep-alive timeout racing it); the second answers.
  std::atomic<int> accepted{0};
  ScriptedServer server([&](int fd) {
    if (accepted++ == 0) {
      read_header(fd);
      send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst");
      read_header(fd);
      return;
    }
    read_header(fd);
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond");
  });
  auto client = server.client(true);
  const auto results = one_at_a_time(client, 2);
  BOOST_REQUIRE_EQUAL(results.size(), 2u);
  BOOST_TEST(results[0].body == "first");
  BOOST_TEST(to_string(results[1].outcome) == "complete");
  BOOST_TEST(results[1].body == "second");
  BOOST_TEST(!results[1].reused);  // it ended on the new connection
  BOOST_TEST(accepted == 2);
}
