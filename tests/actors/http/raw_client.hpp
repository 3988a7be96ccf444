#pragma once
// Test support: a blocking loopback TCP client that sends exact bytes and reads what comes
// back, for HTTP framing cases that no library client would send (pipelining, lying
// Content-Length, half-sent headers, HTTP/1.0). Every read is bounded by a receive timeout.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <string_view>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

namespace actorlm::testing {

class RawClient {
 public:
  explicit RawClient(int port, double timeout_s = 20) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    BOOST_REQUIRE(fd_ >= 0);
    timeval tv{static_cast<time_t>(timeout_s), static_cast<suseconds_t>((timeout_s - static_cast<time_t>(timeout_s)) * 1e6)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE_MESSAGE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "connect failed");
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;  // the server closed: later reads say so
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // Everything until the server closes the connection (or the receive timeout).
  std::string read_all() {
    std::string out;
    char buf[65536];
    for (;;) {
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
  // Reads until `marker` has arrived `times` times in all (or close/timeout); returns what arrived.
  std::string read_until(std::string_view marker, std::size_t times = 1) {
    char buf[65536];
    while (count(marker) < times) {
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      received_.append(buf, static_cast<std::size_t>(n));
    }
    return received_;
  }
  // Whether the server closes the connection within `s` seconds (data before the close is kept).
  bool closed_within(double s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(s);
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
      received_.append(buf, static_cast<std::size_t>(n));
    }
    return false;
  }
  const std::string& received() const { return received_; }

 private:
  std::size_t count(std::string_view what) const {
    std::size_t n = 0;
    for (auto at = received_.find(what); at != std::string::npos; at = received_.find(what, at + what.size())) ++n;
    return n;
  }

 public:

 private:
  int fd_ = -1;
  std::string received_;
};

// Raises this process's descriptor limit to its hard limit (tests that hold thousands of sockets).
inline void raise_descriptor_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

inline std::string post_request(std::string_view path, std::string_view body, std::string_view version = "HTTP/1.1",
                                std::string_view extra_headers = "") {
  return std::string("POST ") + std::string(path) + " " + std::string(version) + "\r\nHost: 127.0.0.1\r\n" +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         std::string(extra_headers) + "\r\n" + std::string(body);
}

inline std::size_t count_of(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace actorlm::testing
