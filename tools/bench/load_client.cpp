#include "tools/bench/load_client.hpp"

#include "actors/http/sse_parser.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <sys/socket.h>

#include <cerrno>
#include <deque>
#include <limits>
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

// What the exchanges share: the io_context, the resolved address, the connect queue (at most
// max_connecting connects in progress), the slow connections held.
struct ClientCore {
  LoadClientOptions opt;
  asio::io_context io{1};  // one thread: no locking inside Asio
  std::vector<tcp::endpoint> resolved;
  std::uint32_t connecting = 0;
  std::deque<std::function<void()>> waiting_to_connect;
  std::vector<tcp::socket> slow;

  explicit ClientCore(LoadClientOptions o) : opt(std::move(o)) {}

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
  }

  void start() {
    result_.start_ns = now_ns();
    timer_.expires_after(req_.timeout);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->finish(LoadOutcome::failed, "timed out");
    });
    client_.when_connect_slot([self = shared_from_this()] {
      if (self->ended_) return self->client_.connected();  // timed out while waiting
      asio::async_connect(self->socket_, self->client_.endpoints(),
                          [self](beast::error_code ec, const tcp::endpoint&) { self->on_connect(ec); });
    });
  }

 private:
  void on_connect(beast::error_code ec) {
    client_.connected();
    if (ended_) return;
    if (ec) return finish(LoadOutcome::failed, "connect: " + ec.message());
    socket_.set_option(tcp::no_delay(true), ec);
    wire_ = wire_request(req_, client_.opt.endpoint);
    asio::async_write(socket_, asio::buffer(wire_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->on_written(ec);
    });
  }

  void on_written(beast::error_code ec) {
    if (ended_) return;
    if (ec) return finish(LoadOutcome::failed, "write: " + ec.message());
    if (req_.close_after_send) return finish(LoadOutcome::closed, "");
    bhttp::async_read_header(socket_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->on_header(ec);
    });
  }

  void on_header(beast::error_code ec) {
    if (ended_) return;
    if (ec) return finish(LoadOutcome::failed, "reading the header: " + ec.message());
    result_.header_ns = now_ns();
    const auto& h = parser_.get();
    result_.status = static_cast<int>(h.result_int());
    if (auto it = h.find("X-Request-Id"); it != h.end()) result_.request_id = std::string(it->value());
    if (auto it = h.find(bhttp::field::content_type); it != h.end())
      sse_ = std::string_view(it->value().data(), it->value().size()).starts_with("text/event-stream");
    if (!drain(result_.header_ns)) return;
    if (parser_.is_done()) return finish(LoadOutcome::complete, "");
    read_more();
  }

  void read_more() {
    bhttp::async_read_some(socket_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->on_read(ec);
    });
  }

  void on_read(beast::error_code ec) {
    if (ended_) return;
    const std::int64_t t = now_ns();
    if (!drain(t)) return;
    if (parser_.is_done()) return finish(LoadOutcome::complete, "");
    if (ec) return finish(LoadOutcome::failed, "reading the body: " + ec.message());
    read_more();
  }

  // Moves the body read so far into the result; false once the exchange is closed on purpose.
  bool drain(std::int64_t t) {
    auto& body = parser_.get().body();
    if (!sse_) {
      result_.body += body;
    } else {
      for (auto& data : sse_parser_.feed(body)) {
        result_.events.push_back({t, std::move(data)});
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
    beast::error_code ignored;
    socket_.close(ignored);  // pending operations end with operation_aborted
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
  bool ended_ = false;
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
  std::erase_if(slow, [](tcp::socket& s) {
    char c;
    // Open while nothing can be read yet: 0 is the server's FIN, > 0 an answer (408, 400...).
    const auto n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    const bool open = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    if (!open) {
      beast::error_code ignored;
      s.close(ignored);
    }
    return !open;
  });
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
