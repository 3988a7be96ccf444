#include "tools/bench/send_floor.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

namespace actorlm::bench {

namespace {

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error("send floor: " + what + ": " + std::strerror(err));
}

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string http_chunk(std::string_view payload) {
  char size[24];
  const int k = std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
  std::string out(size, std::size_t(k));
  out += payload;
  out += "\r\n";
  return out;
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // the client left, or stopped reading for SO_SNDTIMEO
    bytes.remove_prefix(std::size_t(n));
  }
  return true;
}

// Reads a request's header and its Content-Length body (the floor ignores both). False when the
// client closed or sent nothing for 10 s.
bool read_request(int fd) {
  std::string got;
  char buf[4096];
  std::size_t end = std::string::npos;
  while ((end = got.find("\r\n\r\n")) == std::string::npos) {
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    got.append(buf, std::size_t(n));
  }
  std::string header = got.substr(0, end);
  std::transform(header.begin(), header.end(), header.begin(), [](unsigned char c) { return std::tolower(c); });
  std::size_t body = 0;
  if (const auto at = header.find("\r\ncontent-length:"); at != std::string::npos)
    body = std::strtoull(header.c_str() + at + 17, nullptr, 10);
  std::size_t have = got.size() - end - 4;
  while (have < body) {
    const auto n = ::recv(fd, buf, std::min(sizeof buf, body - have), 0);
    if (n <= 0) return false;
    have += std::size_t(n);
  }
  return true;
}

// One accepted connection; closed with it.
struct Conn {
  int fd = -1;
  std::string chunk;
  bool ok = true;
  Conn(int f, std::string c) : fd(f), chunk(std::move(c)) {}
  Conn(Conn&& o) noexcept : fd(std::exchange(o.fd, -1)), chunk(std::move(o.chunk)), ok(o.ok) {}
  Conn& operator=(Conn&&) = delete;
  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
};

// Accepts n connections (blocking sockets, as the server's writes would be if never refused),
// each with its own chunk.
std::vector<Conn> accept_all(int listener, std::uint32_t n, const std::string& model, std::chrono::seconds timeout) {
  std::vector<Conn> conns;
  conns.reserve(n);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (conns.size() < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{listener, POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&p, 1, int(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail("poll", errno);
    if (ready == 0)
      throw std::runtime_error("send floor: " + std::to_string(conns.size()) + " of " + std::to_string(n) +
                               " connections came within " + std::to_string(timeout.count()) + " s");
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      fail("accept", errno);
    }
    Conn c(fd, floor_chunk(std::uint32_t(conns.size() + 1), model));
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as the server's sockets
    // A client that stops reading, or never sends its request, fails its connection instead of
    // holding the floor forever.
    timeval stuck{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stuck, sizeof stuck);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &stuck, sizeof stuck);
    conns.push_back(std::move(c));
  }
  return conns;
}

// The steps: sender threads that wait for each step's start, send their connections' chunks,
// and report back. Fills run.step_ns and run.send_cpu_s.
void run_steps(std::vector<Conn>& conns, unsigned threads, std::uint32_t steps, std::chrono::microseconds interval,
               SendFloorRun& run) {
  run.step_ns.reserve(steps);
  std::barrier go(std::ptrdiff_t(threads) + 1), done(std::ptrdiff_t(threads) + 1);
  std::latch started(1);
  std::atomic<bool> abandon{false};
  std::vector<double> cpu(threads, 0.0);
  std::vector<std::thread> senders;
  auto join = [&] {
    for (auto& t : senders) t.join();
  };
  try {
    for (unsigned t = 0; t < threads; ++t)
      senders.emplace_back([&, t] {
        started.wait();
        if (abandon) return;
        for (std::uint32_t s = 0; s < steps; ++s) {
          go.arrive_and_wait();
          const double c0 = thread_cpu_seconds();
          for (std::size_t i = t; i < conns.size(); i += threads)
            if (conns[i].ok) conns[i].ok = send_all(conns[i].fd, conns[i].chunk);
          cpu[t] += thread_cpu_seconds() - c0;
          done.arrive_and_wait();
        }
      });
  } catch (...) {  // a thread could not start: the others leave before their first step
    abandon = true;
    started.count_down();
    join();
    throw;
  }
  started.count_down();
  auto next = std::chrono::steady_clock::now() + interval;
  for (std::uint32_t s = 0; s < steps; ++s) {
    std::this_thread::sleep_until(next);
    run.step_ns.push_back(now_ns());  // reserved: never throws
    go.arrive_and_wait();
    done.arrive_and_wait();
    next = std::max(next + interval, std::chrono::steady_clock::now());
  }
  join();
  for (double c : cpu) run.send_cpu_s += c;
}

}  // namespace

std::string floor_chunk(std::uint32_t id, const std::string& model) {
  // The server's completion chunk, key for key and serialized as the server does (StreamChunks,
  // actors/http/openai_response.cpp: nlohmann::json, keys sorted, the model's name escaped).
  const nlohmann::json text{{"finish_reason", nullptr}, {"index", 0}, {"logprobs", nullptr}, {"text", " tok"}};
  const nlohmann::json chunk{{"choices", nlohmann::json::array({text})},
                             {"created", 1765000000},
                             {"id", "cmpl-" + std::to_string(id)},
                             {"model", model},
                             {"object", "text_completion"}};
  return http_chunk("data: " + chunk.dump() + "\n\n");
}

SendFloor::SendFloor(unsigned threads) : threads_(std::max(1u, threads)) {
  // Non-blocking, so that a connection the client gave up on between poll() and accept() does
  // not block accept() past the deadline.
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listener_ < 0) fail("socket", errno);
  const int one = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(listener_, 4096) < 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) < 0) {
    const int e = errno;
    ::close(listener_);
    fail("listening on 127.0.0.1", e);
  }
  port_ = ntohs(a.sin_port);
}

SendFloor::~SendFloor() { ::close(listener_); }

SendFloorRun SendFloor::serve(std::uint32_t n, std::uint32_t steps, std::chrono::microseconds interval,
                              const std::string& model, std::chrono::seconds accept_timeout) {
  auto conns = accept_all(listener_, n, model, accept_timeout);
  SendFloorRun run;
  run.streams = n;
  // Every request read and answered with its header before the first step, so that the steps
  // time the chunks alone.
  for (std::size_t i = 0; i < conns.size(); ++i) {
    const std::string header = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                               "X-Request-Id: " + std::to_string(i + 1) +
                               "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    conns[i].ok = read_request(conns[i].fd) && send_all(conns[i].fd, header);
  }
  run_steps(conns, std::min<unsigned>(threads_, std::max<std::uint32_t>(n, 1)), steps, interval, run);
  const std::string end = http_chunk("data: [DONE]\n\n") + "0\r\n\r\n";
  for (auto& c : conns) {
    if (c.ok) c.ok = send_all(c.fd, end);
    if (!c.ok) ++run.failed;
    ::shutdown(c.fd, SHUT_WR);
  }
  return run;  // the connections close with `conns`
}

}  // namespace actorlm::bench
