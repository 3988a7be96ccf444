#include "actors/http/connection.hpp"

#include "actors/http/api_error.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/write.hpp>

#include <charconv>

namespace actorlm::http {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

bool client_left(const error_code& ec) {
  return ec == beast_http::error::end_of_stream || ec == beast_http::error::partial_message || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

}  // namespace

Connection::Connection(asio::ip::tcp::socket s, const ConnectionLimits& limits, ConnectionSet& set, const Router& router)
    : socket_(std::move(s)), limits_(limits), set_(set), router_(router) {
  set_.insert(this);
  error_code ignore;
  // Tokens are small writes: without TCP_NODELAY, Nagle's algorithm would hold each one until
  // the client's (delayed, up to 40 ms) ACK of the previous one.
  socket_.set_option(asio::ip::tcp::no_delay(true), ignore);
}

Connection::~Connection() {
  set_.erase(this);
  if (counter_) --*counter_;
}

void Connection::start() { read_header(); }

void Connection::read_header() {
  state_ = State::reading;
  parser_.emplace();
  parser_->header_limit(limits_.max_header_bytes);
  parser_->body_limit(limits_.max_body_bytes);
  // The first request must come within header_timeout; a kept-alive connection may idle for
  // keep_alive_timeout before its next one.
  deadline_ = SteadyClock::now() + (served_ > 0 ? limits_.keep_alive_timeout : limits_.header_timeout);
  beast_http::async_read_header(socket_, buffer_, *parser_,
                                [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
}

void Connection::on_header(error_code ec) {
  if (ec) return on_request(ec);
  if (state_ == State::closed) return;
  deadline_ = SteadyClock::now() + limits_.body_timeout;
  const auto& req = parser_->get();
  if (boost::beast::iequals(req[beast_http::field::expect], "100-continue") && !parser_->is_done()) {
    // Refuse an announced body over the limit before the client sends it.
    if (const auto len = parser_->content_length(); len && *len > limits_.max_body_bytes)
      return on_request(beast_http::error::body_limit);
    asio::async_write(socket_, asio::buffer(kContinue), [self = shared_from_this()](error_code e, std::size_t) {
      if (e) return self->close();
      self->read_body();
    });
    return;
  }
  read_body();
}

void Connection::read_body() {
  if (parser_->is_done()) return on_request({});
  beast_http::async_read(socket_, buffer_, *parser_,
                         [self = shared_from_this()](error_code ec, std::size_t) { self->on_request(ec); });
}

void Connection::on_request(error_code ec) {
  if (state_ == State::closed || ec == asio::error::operation_aborted) return;
  if (ec) {
    if (client_left(ec)) return close();
    if (ec == beast_http::error::body_limit)
      return refuse(413, "body_too_large", "the request body is larger than server.max_body_bytes (" +
                                               std::to_string(limits_.max_body_bytes) + " bytes)");
    if (ec == beast_http::error::header_limit)
      return refuse(431, "headers_too_large", "the request's headers are larger than " +
                                                  std::to_string(limits_.max_header_bytes) + " bytes");
    return refuse(400, "bad_request", "malformed HTTP request: " + ec.message());
  }
  ++served_;
  Request req = parser_->release();
  parser_.reset();
  version_ = req.version();
  keep_alive_ = req.keep_alive();
  state_ = State::handling;
  deadline_ = SteadyClock::time_point::max();
  monitor();
  router_(shared_from_this(), std::move(req));
}

void Connection::refuse(unsigned status, std::string code, std::string message) {
  keep_alive_ = false;  // the rest of the stream cannot be trusted
  state_ = State::handling;
  Response res{static_cast<beast_http::status>(status), version_ == 10 ? 10u : 11u};
  res.set(beast_http::field::content_type, "application/json");
  res.body() = ApiError{static_cast<int>(status), std::move(message), "invalid_request_error", "", std::move(code)}.to_json();
  respond(std::move(res));
}

void Connection::monitor() {
  if (state_ == State::lingering) buffer_.clear();
  if (monitoring_ || state_ == State::closed || buffer_.size() >= limits_.max_pipelined_bytes) return;
  monitoring_ = true;
  socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, std::size_t n) {
    self->on_monitor(ec, n);
  });
}

void Connection::on_monitor(error_code ec, std::size_t n) {
  monitoring_ = false;
  if (state_ == State::closed) return;
  if (ec && ec != asio::error::operation_aborted) return close();  // the client hung up
  if (!ec) buffer_.commit(n);  // a pipelined request: it waits its turn
  if (want_next_) {
    want_next_ = false;
    return read_header();
  }
  if (!ec) monitor();
}

void Connection::respond(Response&& res) {
  if (state_ != State::handling) return;  // closed, or answered already
  res.version(version_ == 10 ? 10 : 11);
  res.keep_alive(keep_alive_);
  res.prepare_payload();
  response_ = std::make_unique<Response>(std::move(res));
  state_ = State::writing;
  deadline_ = SteadyClock::now() + limits_.write_timeout;
  beast_http::async_write(socket_, *response_, [self = shared_from_this()](error_code ec, std::size_t) {
    self->on_written(ec);
  });
}

void Connection::begin_stream(unsigned status, std::string_view content_type,
                              const std::vector<std::pair<std::string, std::string>>& headers) {
  if (state_ != State::handling) return;
  state_ = State::streaming;
  chunked_ = version_ >= 11;
  if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the body ends when the connection does
  const auto reason = beast_http::obsolete_reason(static_cast<beast_http::status>(status));
  pending_ += chunked_ ? "HTTP/1.1 " : "HTTP/1.0 ";
  pending_ += std::to_string(status) + " " + std::string(reason.data(), reason.size()) + "\r\n";
  pending_ += "Content-Type: " + std::string(content_type) + "\r\nCache-Control: no-cache\r\n";
  for (const auto& [k, v] : headers) pending_ += k + ": " + v + "\r\n";
  if (chunked_) pending_ += "Transfer-Encoding: chunked\r\n";
  pending_ += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  flush();
}

void Connection::append(std::string_view bytes) {
  if (state_ != State::streaming || bytes.empty()) return;
  if (chunked_) {
    char size[24];
    const auto r = std::to_chars(size, size + sizeof size, bytes.size(), 16);
    pending_.append(size, r.ptr);
    pending_ += "\r\n";
    pending_ += bytes;
    pending_ += "\r\n";
  } else {
    pending_ += bytes;
  }
  if (pending_.size() > limits_.max_pending_bytes) close();  // the client reads too slowly: drop it
}

void Connection::flush() {
  if (state_ != State::streaming || writing_ || pending_.empty()) return;
  write_pending();
}

void Connection::write_pending() {
  out_.swap(pending_);
  pending_.clear();
  writing_ = true;
  deadline_ = SteadyClock::now() + limits_.write_timeout;
  asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this()](error_code ec, std::size_t) {
    self->on_written(ec);
  });
}

void Connection::end_stream() {
  if (state_ != State::streaming) return;
  abandon_ = nullptr;  // the answer is complete: nothing left to abort
  if (chunked_) pending_ += "0\r\n\r\n";
  ending_ = true;
  flush();
  if (!writing_) answer_done();
}

void Connection::on_written(error_code ec) {
  if (state_ == State::closed) return;
  if (ec) return close();
  last_write_ = SteadyClock::now();
  if (state_ == State::writing) return answer_done();
  writing_ = false;
  out_.clear();
  if (!pending_.empty()) return write_pending();
  deadline_ = SteadyClock::time_point::max();  // idle until the engine's next tokens
  if (ending_) answer_done();
}

void Connection::answer_done() {
  abandon_ = nullptr;
  auto keep = shared_from_this();
  held_.reset();
  response_.reset();
  ending_ = false;
  std::string().swap(out_);
  if (!keep_alive_) return linger();
  next_request();
}

// Closing a socket with unread input makes the kernel send a reset, which can destroy the
// answer before the client reads it (a 413 refused while the body is still arriving): half-close
// first and drain what comes, for at most a second.
void Connection::linger() {
  state_ = State::lingering;
  error_code ignore;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignore);
  deadline_ = SteadyClock::now() + std::chrono::seconds(1);
  monitor();
}

void Connection::next_request() {
  state_ = State::reading;
  if (monitoring_) {  // its completion reads the next request
    want_next_ = true;
    error_code ignore;
    socket_.cancel(ignore);
    return;
  }
  read_header();
}

void Connection::check_deadline(SteadyClock::time_point now) {
  if (now >= deadline_) close();
}

void Connection::close() {
  if (state_ == State::closed) return;
  auto keep = shared_from_this();
  state_ = State::closed;
  deadline_ = SteadyClock::time_point::max();
  if (counter_) --*std::exchange(counter_, nullptr);
  error_code ignore;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignore);
  socket_.close(ignore);
  if (auto f = std::move(abandon_)) {
    abandon_ = nullptr;
    f();
  }
  held_.reset();
}

}  // namespace actorlm::http
