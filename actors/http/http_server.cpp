#include "actors/http/http_server.hpp"

#include "actors/http/api_call.hpp"
#include "actors/http/connection.hpp"
#include "actors/http/prometheus.hpp"
#include "actors/http/server_metrics.hpp"
#include "actors/http/tokenize.hpp"
#include "actors/serving/served_model.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace actorlm::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = SteadyClock;

namespace {

constexpr auto kSweep = std::chrono::milliseconds(250);         // deadline checks, keep-alive comments
constexpr auto kStreamKeepAlive = std::chrono::seconds(10);     // an idle stream gets an SSE comment
constexpr std::size_t kTokenizeInlineBytes = 16 << 10;          // larger bodies: tokenized on a side thread

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

Response json_response(beast_http::status status, std::string body) {
  Response res{status, 11};
  res.set(beast_http::field::content_type, "application/json");
  res.body() = std::move(body);
  return res;
}

// Closes every connection of a set (closing one can end others' answers, never remove others).
void close_all(ConnectionSet& set) {
  std::vector<std::shared_ptr<Connection>> all;
  all.reserve(set.size());
  for (auto* c : set) all.push_back(c->shared_from_this());
  for (auto& c : all) c->close();
}

}  // namespace

// One event loop and everything that lives on it. Members are destroyed in reverse order: the
// loop (with the handlers that still hold connections) before the bridge and the set they use.
struct IoThread {
  ConnectionSet connections;
  Router router;  // routes this thread's requests (calls made here run on this thread)
  std::unique_ptr<EngineBridge> bridge;
  std::unique_ptr<CallHost> host;
  asio::io_context ctx{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<asio::steady_timer> sweep;
  std::thread thread;  // none for the first: serve() runs it on the caller's thread
};

struct HttpServer::Impl {
  Impl(caf::actor_system& s, serving::ServedModel& m, const config::Config& c);
  // The loops first: what their leftover handlers release (calls, connections) still counts
  // in the members below.
  ~Impl() {
    acceptor.reset();
    for (auto& t : io) t->bridge->detach();  // nothing more posted into loops about to go
    io.clear();
  }

  caf::actor_system& sys;
  serving::ServedModel& model;
  config::Config cfg;
  std::string served_name, response_name;
  ConnectionLimits limits;
  std::vector<std::unique_ptr<IoThread>> io;
  std::optional<tcp::acceptor> acceptor;
  std::size_t next_io = 0;
  asio::thread_pool blocking{1};  // engine queries that wait (/ready, /metrics): never on an I/O thread
  asio::thread_pool tokenizing{1};  // large prompts' tokenization, off the I/O threads
  std::atomic<bool> draining{false}, stopping{false};
  std::atomic<std::size_t> in_flight{0}, connections{0};
  std::atomic<std::uint64_t> engine_ids{1}, response_ids{1};
  ServerMetrics metrics;

  std::mutex pump_mu;  // one drain of the engine's records at a time
  std::thread pump;
  std::mutex pump_wait_mu;
  std::condition_variable pump_cv;
  bool pump_stop = false;
  std::function<void(const std::vector<scheduler::RequestRecord>&)> observer;

  void pump_records();
  void start_pump();
  void stop_pump();
  std::string engine_failure();
  std::optional<ApiError> gate(const Request&) const;
  bool authorized(const Request&) const;

  void accept();
  void arm_sweep(IoThread&);
  void route(const std::shared_ptr<Connection>&, Request&&, IoThread&);
  void dispatch(const std::shared_ptr<Connection>&, Request&&, IoThread&);
  void complete(Endpoint, const std::shared_ptr<Connection>&, Request&&, IoThread&);
  // Runs `answer` (which may wait on the engine) on the blocking pool, responds on `c`'s thread.
  // `answer` runs on `pool` (blocking: engine queries; tokenizing: long prompts' tokenization),
  // and its response is written on the connection's own thread.
  void respond_on(asio::thread_pool& pool, const std::shared_ptr<Connection>& c, std::function<Response()> answer);
  void respond_blocking(const std::shared_ptr<Connection>& c, std::function<Response()> answer) {
    respond_on(blocking, c, std::move(answer));
  }
  // vLLM's /tokenize (encode) or /detokenize: small bodies inline, large ones on `tokenizing`.
  void tokenize(const std::shared_ptr<Connection>& c, Request&& req, bool encode);
  void access_log(const std::string& id, int status, const CompletionSession* s, Clock::time_point t0);
};

HttpServer::Impl::Impl(caf::actor_system& s, serving::ServedModel& m, const config::Config& c)
    : sys(s), model(m), cfg(c), served_name(c.model.name),
      response_name(m.codec().synthetic() ? c.model.name + "-synthetic" : c.model.name) {
  limits.header_timeout = seconds(c.server.header_timeout_s);
  limits.body_timeout = seconds(c.server.body_timeout_s);
  limits.keep_alive_timeout = seconds(c.server.keep_alive_timeout_s);
  limits.write_timeout = seconds(c.server.write_timeout_s);
  limits.max_body_bytes = static_cast<std::uint64_t>(c.server.max_body_bytes);
  for (std::int64_t i = 0; i < c.server.io_threads; ++i) {
    auto t = std::make_unique<IoThread>();
    t->bridge = std::make_unique<EngineBridge>(sys, model.engine(), t->ctx);
    t->host = std::make_unique<CallHost>(CallHost{*t->bridge, in_flight,
        [this](const std::string& id, int status, const CompletionSession& session, Clock::time_point t0) {
          access_log(id, status, &session, t0);
        }});
    t->router = [this, tp = t.get()](const std::shared_ptr<Connection>& conn, Request&& req) {
      dispatch(conn, std::move(req), *tp);
    };
    t->work.emplace(t->ctx.get_executor());
    t->sweep.emplace(t->ctx);
    io.push_back(std::move(t));
  }
}

void HttpServer::Impl::pump_records() {
  std::lock_guard lock(pump_mu);
  const auto records = model.engine().take_request_records();
  metrics.record_requests(records);
  if (observer && !records.empty()) observer(records);
  metrics.record_steps(model.engine().take_step_records());
}

void HttpServer::Impl::start_pump() {
  pump = std::thread([this] {
    std::unique_lock lock(pump_wait_mu);
    while (!pump_cv.wait_for(lock, std::chrono::milliseconds(500), [this] { return pump_stop; })) {
      lock.unlock();
      pump_records();
      lock.lock();
    }
  });
}

void HttpServer::Impl::stop_pump() {
  {
    std::lock_guard lock(pump_wait_mu);
    pump_stop = true;
  }
  pump_cv.notify_all();
  if (pump.joinable()) pump.join();
}

// Why the engine is unhealthy (a lost shard or block manager); empty while it is healthy.
std::string HttpServer::Impl::engine_failure() {
  try {
    return model.engine().stats().failure;
  } catch (const std::exception& e) {
    return std::string("the scheduler is gone: ") + e.what();
  }
}

bool HttpServer::Impl::authorized(const Request& req) const {
  return cfg.server.api_key.empty() || req[beast_http::field::authorization] == "Bearer " + cfg.server.api_key;
}

// The common gate of the API endpoints: key, readiness. Empty when the request may go on.
std::optional<ApiError> HttpServer::Impl::gate(const Request& req) const {
  if (!authorized(req))
    return ApiError{401, "missing or wrong API key: send \"Authorization: Bearer <key>\"", "authentication_error", "",
                    "invalid_api_key"};
  if (draining || stopping)
    return ApiError{503, "the server is shutting down and takes no new requests", "service_unavailable", "", "draining"};
  return std::nullopt;
}

void HttpServer::Impl::respond_on(asio::thread_pool& pool, const std::shared_ptr<Connection>& c,
                                  std::function<Response()> answer) {
  // The connection goes back to its thread inside the handler posted there: the pool thread must
  // never hold its last reference (a connection is destroyed on its own thread).
  asio::post(pool, [c, answer = std::move(answer)]() mutable {
    Response res;
    try {
      res = answer();
    } catch (const std::exception& e) {
      spdlog::error("internal error: {}", e.what());
      res = error_response(ApiError{500, std::string("internal error: ") + e.what(), "server_error", "", "internal_error"});
    }
    const auto home = c->executor();
    asio::post(home, [c = std::move(c), res = std::move(res)]() mutable { c->respond(std::move(res)); });
  });
}

// A request that throws gets a 500 naming the error; the server goes on.
void HttpServer::Impl::dispatch(const std::shared_ptr<Connection>& c, Request&& req, IoThread& t) {
  try {
    route(c, std::move(req), t);
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    c->respond(error_response(ApiError{500, std::string("internal error: ") + e.what(), "server_error", "", "internal_error"}));
  }
}

// Runs an event loop; an exception that escapes a handler is logged and the loop goes on (the
// connection whose handler threw is dropped when its last reference goes).
static void run_loop(asio::io_context& ctx) {
  for (;;) {
    try {
      ctx.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("internal error in the HTTP event loop: {}", e.what());
    }
  }
}

void HttpServer::Impl::route(const std::shared_ptr<Connection>& c, Request&& req, IoThread& t) {
  const std::string_view target(req.target().data(), req.target().size());
  const std::string path(target.substr(0, target.find('?')));
  const bool get = req.method() == beast_http::verb::get, post = req.method() == beast_http::verb::post;
  if (post && path == "/v1/completions") return complete(Endpoint::completions, c, std::move(req), t);
  if (post && path == "/v1/chat/completions") return complete(Endpoint::chat, c, std::move(req), t);
  if (get && path == "/health") return c->respond(json_response(beast_http::status::ok, "{\"status\":\"ok\"}"));
  if (post && (path == "/tokenize" || path == "/detokenize")) return tokenize(c, std::move(req), path == "/tokenize");
  if (get && path == "/v1/models") {
    if (!authorized(req))
      return c->respond(error_response(ApiError{401, "missing or wrong API key", "authentication_error", "", "invalid_api_key"}));
    nlohmann::json m{{"id", served_name}, {"object", "model"}, {"created", 0}, {"owned_by", "actorlm"},
                     {"max_model_len", model.max_model_len()}};
    return c->respond(json_response(beast_http::status::ok, nlohmann::json{{"object", "list"}, {"data", {m}}}.dump()));
  }
  if (get && path == "/ready")
    return respond_blocking(c, [this] {
      std::string reason = engine_failure();
      if (reason.empty() && (draining || stopping)) reason = "draining";
      return json_response(reason.empty() ? beast_http::status::ok : beast_http::status::service_unavailable,
                           reason.empty() ? nlohmann::json{{"ready", true}}.dump()
                                          : nlohmann::json{{"ready", false}, {"reason", reason}}.dump());
    });
  if (get && path == "/metrics")
    return respond_blocking(c, [this] {
      pump_records();
      const auto stats = model.engine().stats();
      auto kv = stats.kv;  // as of the last step, when the block manager cannot say now
      if (stats.healthy) {
        try {
          kv = model.engine().kv_stats();
        } catch (const std::exception& e) {
          spdlog::warn("metrics: the block manager's occupancy is unknown: {}", e.what());
        }
      }
      Response res{beast_http::status::ok, 11};
      res.set(beast_http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = metrics.render(stats.counts, kv, !draining && !stopping && stats.healthy, stats.healthy);
      if (const auto cluster = model.cluster_status()) {
        render_gauge(res.body(), "actorlm_cluster_workers", "Worker processes in [cluster] workers (\"head\" not counted)",
                     cluster->workers);
        render_gauge(res.body(), "actorlm_cluster_workers_up", "Workers hosting this head's ranks now",
                     cluster->workers_up);
        render_counter(res.body(), "actorlm_cluster_worker_failures_total",
                       "Engine failures a lost worker caused (each fails the requests in flight)",
                       double(cluster->worker_failures));
        render_counter(res.body(), "actorlm_cluster_recoveries_total",
                       "Times serving resumed after a lost worker came back", double(cluster->recoveries));
      }
      return res;
    });
  const std::string method(req.method_string().data(), req.method_string().size());
  c->respond(error_response(ApiError{404, "no route for " + method + " " + path, "invalid_request_error", "", "not_found"}));
}

void HttpServer::Impl::complete(Endpoint ep, const std::shared_ptr<Connection>& c, Request&& req, IoThread& t) {
  const auto t0 = Clock::now();
  // A client's X-Request-Id names the response, as vLLM does ("cmpl-" + it), and comes back in
  // the answer's header, errors included, so that its traces meet this server's access log.
  std::string client_id;
  std::optional<ApiError> bad_id;
  if (auto it = req.find("X-Request-Id"); it != req.end()) {
    client_id.assign(it->value().data(), it->value().size());
    if (!valid_client_request_id(client_id)) {
      bad_id = ApiError{400, "X-Request-Id header: expected 1 to " + std::to_string(kMaxClientRequestId) +
                                 " visible ASCII characters (no spaces), found " + std::to_string(client_id.size()) + " bytes",
                        "invalid_request_error", "", "invalid_request_id"};
      client_id.clear();
    }
  }
  const std::string id = (ep == Endpoint::chat ? "chatcmpl-" : "cmpl-") +
                         (client_id.empty() ? std::to_string(response_ids.fetch_add(1)) : client_id);
  auto refuse = [&](const ApiError& e, const CompletionSession* s = nullptr) {
    access_log(id, e.status, s, t0);
    auto res = error_response(e);
    if (!client_id.empty()) res.set("X-Request-Id", client_id);
    c->respond(std::move(res));
  };
  if (bad_id) return refuse(*bad_id);
  if (auto e = gate(req)) return refuse(*e);
  auto parsed = parse_request(ep, req.body(), served_name);
  if (auto* e = std::get_if<ApiError>(&parsed)) return refuse(*e);
  auto& body = std::get<CompletionRequest>(parsed);
  if (auto e = model_not_served(body.model, served_name, response_name)) return refuse(*e);
  auto session = std::make_unique<CompletionSession>(model, std::move(body), engine_ids);
  const ResponseMeta meta{ep, id,
                          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
                          response_name, client_id};
  // Tokenizing takes about a millisecond per few kilobytes of text: a large prompt is tokenized
  // on a side thread, so that the other streams of this I/O thread do not wait for it.
  if (req.body().size() <= kTokenizeInlineBytes) {
    std::optional<ApiError> error;
    try {
      error = session->prepare();
    } catch (const std::exception& e) {  // as on the side thread: logged, answered with the id
      error = ApiError{500, std::string("internal error: ") + e.what(), "server_error", "", "internal_error"};
    }
    if (error) return refuse(*error, session.get());
    return std::make_shared<ApiCall>(*t.host, c, std::move(session), meta, t0)->start();
  }
  asio::post(tokenizing, [this, c, &t, session = std::shared_ptr<CompletionSession>(std::move(session)), meta, t0]() mutable {
    std::optional<ApiError> error;
    try {
      error = session->prepare();
    } catch (const std::exception& e) {
      error = ApiError{500, std::string("internal error: ") + e.what(), "server_error", "", "internal_error"};
    }
    const auto home = c->executor();  // c goes with the handler: see respond_blocking
    asio::post(home, [this, c = std::move(c), &t, session = std::move(session), meta, t0, error = std::move(error)]() mutable {
      if (error) {
        access_log(meta.id, error->status, session.get(), t0);
        auto res = error_response(*error);
        if (!meta.client_request_id.empty()) res.set("X-Request-Id", meta.client_request_id);
        return c->respond(std::move(res));
      }
      if (!c->is_open()) return access_log(meta.id, 499, session.get(), t0);  // the client left meanwhile
      auto owned = std::make_unique<CompletionSession>(std::move(*session));
      std::make_shared<ApiCall>(*t.host, c, std::move(owned), meta, t0)->start();
    });
  });
}

void HttpServer::Impl::tokenize(const std::shared_ptr<Connection>& c, Request&& req, bool encode) {
  const bool inline_body = req.body().size() <= kTokenizeInlineBytes;
  auto answer = [this, encode, body = std::move(req.body())] {
    const TokenizeContext ctx{model.codec(), model.vocab_size(), model.max_model_len(), served_name, response_name};
    auto a = encode ? tokenize_json(body, ctx) : detokenize_json(body, ctx);
    if (auto* e = std::get_if<ApiError>(&a)) return error_response(*e);
    return json_response(beast_http::status::ok, std::get<std::string>(a));
  };
  if (inline_body) return c->respond(answer());  // an exception: dispatch() answers 500
  respond_on(tokenizing, c, std::move(answer));
}

void HttpServer::Impl::access_log(const std::string& id, int status, const CompletionSession* s, Clock::time_point t0) {
  metrics.record_http_status(status);
  const double ttft = s && s->first_token() != Clock::time_point{} ? std::chrono::duration<double>(s->first_token() - t0).count() : -1;
  std::string prompt;
  if (cfg.server.log_prompts && s) {
    const auto& req = s->request();
    for (const auto& p : req.prompts) prompt += p.is_tokens ? "<" + std::to_string(p.tokens.size()) + " token ids>" : p.text;
    for (const auto& m : req.messages) prompt += "[" + m.role + "] " + m.content + " ";
    prompt = " prompt=" + nlohmann::json(prompt).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  spdlog::info("{} engine_id={} status={} prompt_tokens={} output_tokens={} ttft={:.3f}s total={:.3f}s{}", id,
               s ? s->first_request_id() : 0, status, s ? s->prompt_tokens() : 0, s ? s->completion_tokens() : 0, ttft, since(t0),
               prompt);
}

void HttpServer::Impl::accept() {
  IoThread& t = *io[next_io];
  next_io = (next_io + 1) % io.size();
  acceptor->async_accept(t.ctx, [this, &t](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || stopping) return;
    if (!ec) {
      if (connections >= static_cast<std::size_t>(cfg.server.max_connections)) {
        // Refused at once, with a body that says why; the write fits in a fresh socket's buffer.
        static const std::string full = [] {
          const std::string body = ApiError{503, "the server already holds server.max_connections connections",
                                            "service_unavailable", "", "too_many_connections"}.to_json();
          return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                 "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        }();
        boost::system::error_code ignore;
        socket.non_blocking(true, ignore);
        socket.write_some(asio::buffer(full), ignore);
        socket.shutdown(tcp::socket::shutdown_send, ignore);
      } else {
        ++connections;
        asio::post(t.ctx, [this, &t, s = std::move(socket)]() mutable {
          if (stopping) {  // accepted just before stop(): its close_all has run already
            --connections;
            return;
          }
          auto c = std::make_shared<Connection>(std::move(s), limits, t.connections, t.router);
          c->counted_by(connections);
          c->start();
        });
      }
    } else {
      spdlog::warn("accept: {}", ec.message());  // e.g. out of file descriptors: keep serving the others
    }
    accept();
  });
}

void HttpServer::Impl::arm_sweep(IoThread& t) {
  t.sweep->expires_after(kSweep);
  t.sweep->async_wait([this, &t](boost::system::error_code ec) {
    if (ec || stopping) return;
    const auto now = Clock::now();
    std::vector<std::shared_ptr<Connection>> all;
    all.reserve(t.connections.size());
    for (auto* c : t.connections) all.push_back(c->shared_from_this());
    for (auto& c : all) {
      c->check_deadline(now);
      if (c->streaming() && now - c->last_write() > kStreamKeepAlive) {
        c->append(": keep-alive\n\n");  // keeps proxies with idle timeouts from closing a quiet stream
        c->flush();
      }
    }
    arm_sweep(t);
  });
}

HttpServer::HttpServer(caf::actor_system& sys, serving::ServedModel& model, const config::Config& cfg)
    : impl_(std::make_unique<Impl>(sys, model, cfg)) {}

HttpServer::~HttpServer() {
  stop();
  impl_->stop_pump();
  impl_->blocking.join();
  impl_->tokenizing.join();
}

int HttpServer::bind() {
  auto& im = *impl_;
  const auto& c = im.cfg.server;
  const auto fail = [&](const std::string& why) {
    return std::runtime_error("cannot listen on " + c.host + ":" + std::to_string(c.port) + " (" + why + ")");
  };
  boost::system::error_code ec;
  tcp::resolver resolver(im.io.front()->ctx);
  const auto found = resolver.resolve(c.host, std::to_string(c.port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) throw fail("not an address of this machine? " + ec.message());
  const tcp::endpoint at = found.begin()->endpoint();
  im.acceptor.emplace(im.io.front()->ctx);
  im.acceptor->open(at.protocol(), ec);
  if (!ec) im.acceptor->set_option(tcp::acceptor::reuse_address(true), ec);  // restart without TIME_WAIT trouble
  if (!ec) im.acceptor->bind(at, ec);
  if (!ec) im.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw fail(ec == asio::error::address_in_use ? "address in use" : ec.message());
  return im.acceptor->local_endpoint().port();
}

void HttpServer::serve() {
  auto& im = *impl_;
  if (!im.acceptor) throw std::logic_error("HttpServer::serve before bind");
  im.start_pump();
  asio::post(im.io.front()->ctx, [&im] { im.accept(); });
  for (auto& t : im.io) im.arm_sweep(*t);
  for (std::size_t i = 1; i < im.io.size(); ++i) im.io[i]->thread = std::thread([&t = *im.io[i]] { run_loop(t.ctx); });
  run_loop(im.io.front()->ctx);
  for (std::size_t i = 1; i < im.io.size(); ++i)
    if (im.io[i]->thread.joinable()) im.io[i]->thread.join();
}

void HttpServer::begin_drain() { impl_->draining = true; }

void HttpServer::observe_records(std::function<void(const std::vector<scheduler::RequestRecord>&)> observer) {
  impl_->observer = std::move(observer);
}

std::size_t HttpServer::in_flight() const { return impl_->in_flight; }

void HttpServer::stop() {
  auto& im = *impl_;
  if (im.stopping.exchange(true)) return;
  for (std::size_t i = 0; i < im.io.size(); ++i) {
    IoThread& t = *im.io[i];
    asio::post(t.ctx, [&im, &t, first = i == 0] {
      boost::system::error_code ignore;
      if (first && im.acceptor) im.acceptor->close(ignore);
      close_all(t.connections);  // abandons the answers in progress: their engine requests are aborted
      t.sweep->cancel();
      t.work.reset();
    });
  }
}

}  // namespace actorlm::http
