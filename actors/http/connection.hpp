#pragma once
// One client connection of the HTTP server (Boost.Beast over Asio), driven entirely by its I/O
// thread's event loop: it reads a request (header, then body: each against its own deadline,
// `Expect: 100-continue` answered, size limits enforced), hands it to the router, and writes
// the answer, whole or streamed. Requests are answered in order (pipelined ones wait in the
// read buffer); HTTP/1.0 and keep-alive follow Beast's rules.
//
// While an answer is being made the connection keeps a read open on the socket, so that a
// client that hangs up is noticed at once and the call's abandon handler runs (its engine
// requests are aborted). A streamed answer is written in coalesced chunks: everything appended
// while a write is in flight goes out in the next one; a client that reads nothing for
// write_timeout, or lets more than max_pending_bytes pile up, is dropped.
//
// Deadlines are checked by the I/O thread's sweep (check_deadline), not by a timer per
// connection. Every member function runs on the connection's I/O thread.

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

namespace actorlm::http {

namespace beast_http = boost::beast::http;
using Request = beast_http::request<beast_http::string_body>;
using Response = beast_http::response<beast_http::string_body>;
using SteadyClock = std::chrono::steady_clock;

struct ConnectionLimits {
  SteadyClock::duration header_timeout = std::chrono::seconds(10);
  SteadyClock::duration body_timeout = std::chrono::seconds(30);
  SteadyClock::duration keep_alive_timeout = std::chrono::seconds(5);
  SteadyClock::duration write_timeout = std::chrono::seconds(30);
  std::uint64_t max_body_bytes = 1 << 20;
  std::uint32_t max_header_bytes = 16 << 10;
  std::size_t max_pending_bytes = 8 << 20;   // a streamed answer's unsent bytes
  std::size_t max_pipelined_bytes = 64 << 10;  // read ahead while an answer is being made
};

class Connection;
// The connections of one I/O thread (for the deadline sweep and for stopping).
using ConnectionSet = std::unordered_set<Connection*>;
// Answers one request: eventually calls respond(), or begin_stream() ... end_stream().
using Router = std::function<void(const std::shared_ptr<Connection>&, Request&&)>;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::ip::tcp::socket, const ConnectionLimits&, ConnectionSet&, const Router&);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start();

  // The whole answer to the current request (version and keep-alive are set here).
  void respond(Response&&);
  // A streamed answer: the header now (chunked on HTTP/1.1, until close on HTTP/1.0), then
  // appended bytes, sent by flush(), then end_stream().
  void begin_stream(unsigned status, std::string_view content_type,
                    const std::vector<std::pair<std::string, std::string>>& headers);
  void append(std::string_view bytes);
  void flush();
  void end_stream();
  // Runs once if the connection closes while an answer is being made (the client left, a
  // deadline passed, the server stops). Cleared when the answer completes.
  void on_abandon(std::function<void()> f) { abandon_ = std::move(f); }
  // Keeps `owner` alive until the answer completes or the connection closes.
  void hold(std::shared_ptr<void> owner) { held_ = std::move(owner); }
  // `open` counts this connection (the caller counted it in): decremented once it closes.
  void counted_by(std::atomic<std::size_t>& open) { counter_ = &open; }

  bool is_open() const { return state_ != State::closed; }
  boost::asio::any_io_executor executor() { return socket_.get_executor(); }
  // Seconds since the last byte went out on a streamed answer (for keep-alive comments).
  SteadyClock::time_point last_write() const { return last_write_; }
  bool streaming() const { return state_ == State::streaming; }
  void check_deadline(SteadyClock::time_point now);
  // Drops the connection now (abandoning an answer in progress).
  void close();

 private:
  enum class State { reading, handling, writing, streaming, lingering, closed };
  void read_header();
  void on_header(boost::system::error_code);
  void read_body();
  void on_request(boost::system::error_code);
  void refuse(unsigned status, std::string code, std::string message);  // answer and close
  void monitor();
  void on_monitor(boost::system::error_code, std::size_t);
  void write_response();
  void write_pending();
  void on_written(boost::system::error_code);
  void answer_done();
  void next_request();
  void linger();  // after the last answer: send FIN, read and drop what the client still sends

  boost::asio::ip::tcp::socket socket_;
  const ConnectionLimits& limits_;
  ConnectionSet& set_;
  const Router& router_;
  boost::beast::flat_buffer buffer_;
  std::optional<beast_http::request_parser<beast_http::string_body>> parser_;
  State state_ = State::reading;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool chunked_ = true;
  std::uint64_t served_ = 0;
  SteadyClock::time_point deadline_ = SteadyClock::time_point::max();
  SteadyClock::time_point last_write_{};
  bool monitoring_ = false;      // a read is open while the answer is made
  bool want_next_ = false;       // the answer is done; read the next request once the monitor ends
  std::unique_ptr<Response> response_;
  std::string pending_, out_;    // streamed bytes: appended, in flight
  bool writing_ = false, ending_ = false;
  std::function<void()> abandon_;
  std::shared_ptr<void> held_;
  std::atomic<std::size_t>* counter_ = nullptr;
};

}  // namespace actorlm::http
