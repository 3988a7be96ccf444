#include "tools/bench/load_client.hpp"

#include "actors/http/sse_parser.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <stdexcept>

namespace actorlm::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

const char* to_string(LoadOutcome o) {
  switch (o) {
    case LoadOutcome::complete: return "complete";
    case LoadOutcome::closed: return "closed";
    case LoadOutcome::failed: return "failed";
  }
  return "?";
}

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string wire_request(const LoadRequest& r, const Endpoint& ep) {
  std::string s = r.method + " " + r.target + " HTTP/1.1\r\nHost: " + ep.host + ":" + std::to_string(ep.port) + "\r\n";
  for (const auto& [k, v] : r.headers) s += k + ": " + v + "\r\n";
  if (!r.body.empty()) s += "Content-Type: application/json\r\n";
  if (!r.body.empty() || r.method == "POST" || r.method == "PUT")
    s += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  s += "\r\n";
  s += r.body;
  return s;
}

// A connection nothing can be read from yet (0 would be the server's FIN, > 0 an answer it
// sent unasked, such as a 408): still open and quiet. Otherwise it is closed here.
bool quiet_or_close(tcp::socket& s) {
  char c;
  const auto n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
  beast::error_code ignored;
  s.close(ignored);
  return false;
}

// What the exchanges share: the io_context, the resolved address, the connect queue (at most
// max_connecting connects in progress), the slow connections held.
struct ClientCore {
  LoadClientOptions opt;
  asio::io_context io{1};  // one thread: no locking inside Asio
  std::vector<tcp::endpoint> resolved;
  std::uint32_t connecting = 0;
  std::deque<std::function<void()>> waiting_to_connect;
  std::vector<tcp::socket> slow;
  std::vector<tcp::socket> idle;  // keep_alive: connections an answer left open

  explicit ClientCore(LoadClientOptions o) : opt(std::move(o)) {}

  // An idle connection the server has not closed since (nor sent anything on), if any.
  std::optional<tcp::socket> take_idle() {
    while (!idle.empty()) {
      tcp::socket s = std::move(idle.back());
      idle.pop_back();
      if (quiet_or_close(s)) return s;
    }
    return std::nullopt;
  }

  const std::vector<tcp::endpoint>& endpoints() {
    if (resolved.empty()) {
      tcp::resolver resolver(io);
      for (const auto& e : resolver.resolve(opt.endpoint.host, std::to_string(opt.endpoint.port)))
        resolved.push_back(e.endpoint());
      if (resolved.empty()) throw std::runtime_error("load client: " + opt.endpoint.host + " does not resolve");
    }
    return resolved;
  }
  // Runs `connect` now or once a connect in progress has ended; call connected() after each.
  void when_connect_slot(std::function<void()> connect) {
    if (connecting < opt.max_connecting) {
      ++connecting;
      connect();
    } else {
      waiting_to_connect.push_back(std::move(connect));
    }
  }
  void connected() {
    --connecting;
    if (waiting_to_connect.empty()) return;
    auto next = std::move(waiting_to_connect.front());
    waiting_to_connect.pop_front();
    ++connecting;
    next();
  }
  void run_io() {
    io.restart();
    io.run();
  }
};

// One request on its own connection: connect, write, read the header, then the body as it comes.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  using Done = std::function<void(LoadResult)>;
  Exchange(ClientCore& client, LoadRequest req, Done done)
      : client_(client), req_(std::move(req)), done_(std::move(done)), socket_(client.io), timer_(client.io) {
    result_.tag = req_.tag;
    // Drained as it arrives, so no limit (Beast 1.74 compares a length with boost::none as
    // "over the limit": the largest number instead).
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
    parser_.eager(true);
  }

  void start() {
    if (req_.release_ns > now_ns()) {  // released by the timer, then timed out by it
      timer_.expires_at(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(req_.release_ns)));
      timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (!ec) self->begin();
      });
      return;
    }
    begin();
  }

 private:
  void begin() {
    result_.start_ns = now_ns();
    timer_.expires_after(req_.timeout);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->finish(LoadOutcome::failed, "timed out");
    });
    if (may_keep_alive())
      if (auto s = client_.take_idle()) {
        socket_ = std::move(*s);
        result_.reused = true;
        return send_request();
      }
    connect();
  }

  // Keep-alive applies to exchanges that end with their answer, not those closed on purpose.
  bool may_keep_alive() const {
    return client_.opt.keep_alive && !req_.close_after_send && req_.close_after_events < 0;
  }

  // A reused connection the server closed before answering (an idle timeout racing this
  // request): once, a new connection instead.
  bool retry_on_new_connection() {
    if (!result_.reused || header_seen_ || received_ > 0) return false;
    result_.reused = false;
    beast::error_code ignored;
    socket_.close(ignored);
    socket_ = tcp::socket(client_.io);
    connect();
    return true;
  }

  void connect() {
    client_.when_connect_slot([self = shared_from_this()] {
      if (self->ended_) {  // timed out while waiting: pass the slot on, without nesting
        asio::post(self->client_.io, [&core = self->client_] { core.connected(); });
        return;
      }
      asio::async_connect(self->socket_, self->client_.endpoints(),
                          [self](beast::error_code ec, const tcp::endpoint&) { self->on_connect(ec); });
    });
  }

  void on_connect(beast::error_code ec) {
    client_.connected();
    if (ended_) return;
    if (ec) return finish(LoadOutcome::failed, "connect: " + ec.message());
    socket_.set_option(tcp::no_delay(true), ec);
    if (client_.opt.kernel_timestamps) {
      const int on = 1;
      ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
    }
    send_request();
  }

  void send_request() {
    if (wire_.empty()) wire_ = wire_request(req_, client_.opt.endpoint);
    asio::async_write(socket_, asio::buffer(wire_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->on_written(ec);
    });
  }

  void on_written(beast::error_code ec) {
    if (ended_) return;
    if (ec && retry_on_new_connection()) return;
    if (ec) return finish(LoadOutcome::failed, "write: " + ec.message());
    if (req_.close_after_send) return finish(LoadOutcome::closed, "");
    wait_readable();
  }

  // Asio's epoll reactor is edge-triggered: each wake reads until the socket is empty.
  void wait_readable() {
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      self->on_readable(ec);
    });
  }

  void on_readable(beast::error_code ec) {
    if (ended_) return;
    if (ec) return finish(LoadOutcome::failed, "waiting for the answer: " + ec.message());
    for (;;) {
      const auto n = receive();
      if (n == -1) return wait_readable();
      if (n <= 0 && retry_on_new_connection()) return;
      if (n == -2) return finish(LoadOutcome::failed, std::string("reading the answer: ") + std::strerror(errno));
      if (n == 0) {
        parser_.put_eof(ec);  // an answer that ends with the connection is complete now
        if (ec || !parser_.is_done())
          return finish(LoadOutcome::failed, "the server closed the connection before the end of the answer");
      } else if (!parse()) {
        return;
      }
      if (!header_seen_ && parser_.is_header_done()) on_header();
      if (!drain()) return;
      if (parser_.is_done()) return finish(LoadOutcome::complete, "");
    }
  }

  // One recvmsg into the buffer, with the kernel's receive time of the last segment read
  // (SO_TIMESTAMPNS, CLOCK_REALTIME) taken over to steady_clock: a client busy with other
  // connections does not add its own delay to the arrival. Returns the bytes read: 0 at the
  // server's EOF, -1 when the socket is empty, -2 on an error (errno says which).
  std::int64_t receive() {
    const auto space = buffer_.prepare(16384);
    iovec iov{space.data(), space.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const auto n = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
    buffer_.commit(static_cast<std::size_t>(n));
    received_ += static_cast<std::uint64_t>(n);
    read_ns_ = now_ns();
    arrival_ns_ = read_ns_;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts;
        std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
        const auto realtime_now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::system_clock::now().time_since_epoch()).count();
        arrival_ns_ = std::min(read_ns_, std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec - (realtime_now - read_ns_));
      }
    return n;
  }

  // Feeds the buffer to the HTTP parser; false (and the exchange failed) on a malformed answer.
  bool parse() {
    while (buffer_.size() > 0 && !parser_.is_done()) {
      beast::error_code ec;
      const auto used = parser_.put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == bhttp::error::need_more) break;
      if (ec) {
        finish(LoadOutcome::failed, "a malformed answer: " + ec.message());
        return false;
      }
      if (used == 0) break;
    }
    return true;
  }

  void on_header() {
    header_seen_ = true;
    result_.header_ns = arrival_ns_;
    const auto& h = parser_.get();
    result_.status = static_cast<int>(h.result_int());
    if (auto it = h.find("X-Request-Id"); it != h.end()) result_.request_id = std::string(it->value());
    if (auto it = h.find(bhttp::field::content_type); it != h.end())
      sse_ = std::string_view(it->value().data(), it->value().size()).starts_with("text/event-stream");
  }

  // Moves the body read so far into the result; false once the exchange is closed on purpose.
  bool drain() {
    auto& body = parser_.get().body();
    if (!sse_) {
      result_.body += body;
    } else {
      for (auto& data : sse_parser_.feed(body)) {
        result_.events.push_back({arrival_ns_, read_ns_, std::move(data)});
        if (req_.close_after_events >= 0 && std::int64_t(result_.events.size()) >= req_.close_after_events) {
          body.clear();
          finish(LoadOutcome::closed, "");
          return false;
        }
      }
    }
    body.clear();
    return true;
  }

  void finish(LoadOutcome outcome, std::string error) {
    if (ended_) return;
    ended_ = true;
    result_.end_ns = now_ns();
    result_.outcome = outcome;
    result_.error = std::move(error);
    timer_.cancel();
    if (outcome == LoadOutcome::complete && may_keep_alive() && parser_.keep_alive() && buffer_.size() == 0) {
      client_.idle.push_back(std::move(socket_));  // no operation is pending on it: this is a read's handler
    } else {
      beast::error_code ignored;
      socket_.close(ignored);  // pending operations end with operation_aborted
    }
    done_(std::move(result_));
  }

  ClientCore& client_;
  LoadRequest req_;
  Done done_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  bhttp::response_parser<bhttp::string_body> parser_;
  http::SseParser sse_parser_;
  bool sse_ = false;
  bool header_seen_ = false;
  bool ended_ = false;
  std::int64_t arrival_ns_ = 0, read_ns_ = 0;  // of the last receive()
  std::uint64_t received_ = 0;                 // bytes of the answer so far
  std::string wire_;
  LoadResult result_;
};

}  // namespace

struct LoadClient::Impl : ClientCore {
  using ClientCore::ClientCore;
};

LoadClient::LoadClient(LoadClientOptions opt) : impl_(std::make_unique<Impl>(std::move(opt))) {}
LoadClient::~LoadClient() = default;
LoadClient::LoadClient(LoadClient&&) noexcept = default;
LoadClient& LoadClient::operator=(LoadClient&&) noexcept = default;

void LoadClient::run(std::uint32_t concurrency, const std::function<std::optional<LoadRequest>()>& next,
                     const std::function<void(LoadResult)>& on_result) {
  impl_->endpoints();  // resolve (or throw) before anything starts
  // Each slot starts its next exchange from a posted handler, so that a long run of
  // exchanges that end at once does not nest.
  std::function<void()> start_one = [&] {
    auto req = next();
    if (!req) return;
    std::make_shared<Exchange>(*impl_, std::move(*req), [&](LoadResult r) {
      on_result(std::move(r));
      asio::post(impl_->io, start_one);
    })->start();
  };
  for (std::uint32_t i = 0; i < concurrency; ++i) asio::post(impl_->io, start_one);
  impl_->run_io();
}

std::vector<LoadResult> LoadClient::run_all(std::vector<LoadRequest> requests) {
  std::vector<LoadResult> results(requests.size());
  std::size_t i = 0;
  for (auto& r : requests) r.tag = i++;
  std::size_t taken = 0;
  run(
      static_cast<std::uint32_t>(requests.size()),
      [&]() -> std::optional<LoadRequest> {
        if (taken == requests.size()) return std::nullopt;
        return std::move(requests[taken++]);
      },
      [&](LoadResult r) {
        const auto tag = r.tag;
        results[tag] = std::move(r);
      });
  for (std::size_t k = 0; k < results.size(); ++k) results[k].tag = k;
  return results;
}

std::size_t LoadClient::open_slow(std::size_t count) {
  const auto& eps = impl_->endpoints();
  const auto& ep = impl_->opt.endpoint;
  // The request line and one header: a server waits for the rest of the header.
  const auto partial = std::make_shared<std::string>("POST /v1/completions HTTP/1.1\r\nHost: " + ep.host + ":" +
                                                     std::to_string(ep.port) + "\r\nContent-Type: application/json\r\n");
  std::vector<std::shared_ptr<tcp::socket>> opening;
  std::vector<char> ok(count, 0);
  for (std::size_t i = 0; i < count; ++i) {
    auto s = std::make_shared<tcp::socket>(impl_->io);
    opening.push_back(s);
    impl_->when_connect_slot([this, s, &eps, partial, &ok, i] {
      asio::async_connect(*s, eps, [this, s, partial, &ok, i](beast::error_code ec, const tcp::endpoint&) {
        impl_->connected();
        if (ec) return;
        asio::async_write(*s, asio::buffer(*partial), [&ok, i](beast::error_code ec, std::size_t) { ok[i] = !ec; });
      });
    });
  }
  impl_->run_io();
  for (std::size_t i = 0; i < count; ++i)
    if (ok[i]) impl_->slow.push_back(std::move(*opening[i]));
  return impl_->slow.size();
}

std::size_t LoadClient::slow_still_open() {
  auto& slow = impl_->slow;
  std::erase_if(slow, [](tcp::socket& s) { return !quiet_or_close(s); });
  return slow.size();
}

void LoadClient::close_slow() {
  for (auto& s : impl_->slow) {
    beast::error_code ignored;
    s.close(ignored);
  }
  impl_->slow.clear();
}

}  // namespace actorlm::bench
