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
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace actorlm::bench {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("send floor: " + what + ": " + std::strerror(errno));
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
    if (n <= 0) return false;
    bytes.remove_prefix(std::size_t(n));
  }
  return true;
}

// Reads a request's header and its Content-Length body (the floor ignores both). False when the
// client closed or sent nothing for 10 s.
bool read_request(int fd) {
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
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

}  // namespace

std::string floor_chunk(std::uint32_t id) {
  // The server's completion chunk, key for key (StreamChunks): ~160 bytes.
  const std::string data = "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"logprobs\":null,\"text\":\" tok\"}],"
                           "\"created\":1765000000,\"id\":\"cmpl-" + std::to_string(id) +
                           "\",\"model\":\"falcon-40b\",\"object\":\"text_completion\"}\n\n";
  return http_chunk(data);
}

SendFloor::SendFloor(unsigned threads) : threads_(std::max(1u, threads)) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) fail("socket");
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
    errno = e;
    fail("listening on 127.0.0.1");
  }
  port_ = ntohs(a.sin_port);
}

SendFloor::~SendFloor() { ::close(listener_); }

SendFloorRun SendFloor::serve(std::uint32_t n, std::uint32_t steps, std::chrono::microseconds interval,
                              std::chrono::seconds accept_timeout) {
  struct Conn {
    int fd = -1;
    std::string chunk;
    bool ok = true;
  };
  std::vector<Conn> conns;
  conns.reserve(n);
  auto close_all = [&] {
    for (auto& c : conns) ::close(c.fd);
  };
  const auto deadline = std::chrono::steady_clock::now() + accept_timeout;
  while (conns.size() < n) {
    pollfd p{listener_, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) == 0) {
      close_all();
      throw std::runtime_error("send floor: " + std::to_string(conns.size()) + " of " + std::to_string(n) +
                               " connections came within " + std::to_string(accept_timeout.count()) + " s");
    }
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      close_all();
      fail("accept");
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as the server's sockets
    conns.push_back(Conn{fd, floor_chunk(std::uint32_t(conns.size() + 1)), true});
  }
  SendFloorRun run;
  run.streams = n;
  // Every request read and answered with its header before the first step, so that the steps
  // time the chunks alone.
  for (std::size_t i = 0; i < conns.size(); ++i) {
    auto& c = conns[i];
    const std::string header = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                               "X-Request-Id: " + std::to_string(i + 1) +
                               "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    c.ok = read_request(c.fd) && send_all(c.fd, header);
  }

  const unsigned threads = std::min<unsigned>(threads_, std::max<std::uint32_t>(n, 1));
  std::barrier go(std::ptrdiff_t(threads) + 1), done(std::ptrdiff_t(threads) + 1);
  std::vector<double> cpu(threads, 0.0);
  std::vector<std::thread> senders;
  for (unsigned t = 0; t < threads; ++t)
    senders.emplace_back([&, t] {
      for (std::uint32_t s = 0; s < steps; ++s) {
        go.arrive_and_wait();
        const double c0 = thread_cpu_seconds();
        for (std::size_t i = t; i < conns.size(); i += threads)
          if (conns[i].ok) conns[i].ok = send_all(conns[i].fd, conns[i].chunk);
        cpu[t] += thread_cpu_seconds() - c0;
        done.arrive_and_wait();
      }
    });
  auto next = std::chrono::steady_clock::now() + interval;
  for (std::uint32_t s = 0; s < steps; ++s) {
    std::this_thread::sleep_until(next);
    run.step_ns.push_back(now_ns());
    go.arrive_and_wait();
    done.arrive_and_wait();
    next = std::max(next + interval, std::chrono::steady_clock::now());
  }
  for (auto& t : senders) t.join();
  for (double c : cpu) run.send_cpu_s += c;

  const std::string end = http_chunk("data: [DONE]\n\n") + "0\r\n\r\n";
  for (auto& c : conns) {
    if (c.ok) c.ok = send_all(c.fd, end);
    if (!c.ok) ++run.failed;
    ::shutdown(c.fd, SHUT_WR);
  }
  close_all();
  return run;
}

}  // namespace actorlm::bench
