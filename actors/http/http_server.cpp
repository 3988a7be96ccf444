#include "actors/http/http_server.hpp"

#include "actors/http/client_socket.hpp"
#include "actors/http/completion_session.hpp"
#include "actors/http/openai_response.hpp"
#include "actors/http/server_metrics.hpp"
#include "actors/serving/served_model.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <condition_variable>

#include <sys/socket.h>
#include <thread>

namespace actorlm::http {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kHeartbeat = std::chrono::milliseconds(200);  // idle time before probing the client

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 429) res.set_header("Retry-After", "1");
  res.set_content(e.to_json(), "application/json");
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

struct HttpServer::Impl {
  Impl(caf::actor_system& s, serving::ServedModel& m, const config::Config& c)
      : sys(s), model(m), cfg(c), served_name(c.model.name),
        response_name(m.codec().synthetic() ? c.model.name + "-synthetic" : c.model.name) {}

  caf::actor_system& sys;
  serving::ServedModel& model;
  config::Config cfg;
  std::string served_name, response_name;
  httplib::Server svr;
  std::atomic<bool> draining{false}, stopping{false};
  std::atomic<std::size_t> in_flight{0};
  int listen_fd = -1;
  std::atomic<std::uint64_t> engine_ids{1}, response_ids{1};
  ServerMetrics metrics;
  std::mutex pump_mu;  // one drain of the engine's records at a time
  std::thread pump;
  std::mutex pump_wait_mu;
  std::condition_variable pump_cv;
  bool pump_stop = false;

  std::function<void(const std::vector<scheduler::RequestRecord>&)> observer;

  void pump_records() {
    std::lock_guard lock(pump_mu);
    const auto records = model.engine().take_request_records();
    metrics.record_requests(records);
    if (observer && !records.empty()) observer(records);
    metrics.record_steps(model.engine().take_step_records());
  }

  void start_pump() {
    pump = std::thread([this] {
      std::unique_lock lock(pump_wait_mu);
      while (!pump_cv.wait_for(lock, std::chrono::milliseconds(500), [this] { return pump_stop; })) {
        lock.unlock();
        pump_records();
        lock.lock();
      }
    });
  }

  void stop_pump() {
    {
      std::lock_guard lock(pump_wait_mu);
      pump_stop = true;
    }
    pump_cv.notify_all();
    if (pump.joinable()) pump.join();
  }

  // Why the engine is unhealthy (a lost shard or block manager); empty while it is healthy.
  std::string engine_failure() {
    try {
      return model.engine().stats().failure;
    } catch (const std::exception& e) {
      return std::string("the scheduler is gone: ") + e.what();
    }
  }

  // The common gate of the API endpoints: key, readiness. Empty when the request may go on.
  std::optional<ApiError> gate(const httplib::Request& req) const {
    if (!cfg.server.api_key.empty() && req.get_header_value("Authorization") != "Bearer " + cfg.server.api_key)
      return ApiError{401, "missing or wrong API key: send \"Authorization: Bearer <key>\"", "authentication_error", "",
                      "invalid_api_key"};
    if (draining || stopping)
      return ApiError{503, "the server is shutting down and takes no new requests", "service_unavailable", "", "draining"};
    return std::nullopt;
  }

  void routes() {
    svr.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { complete(Endpoint::completions, q, r); });
    svr.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { complete(Endpoint::chat, q, r); });
    svr.Get("/v1/models", [this](const httplib::Request& q, httplib::Response& r) {
      if (!cfg.server.api_key.empty() && q.get_header_value("Authorization") != "Bearer " + cfg.server.api_key)
        return send_error(r, ApiError{401, "missing or wrong API key", "authentication_error", "", "invalid_api_key"});
      nlohmann::json m{{"id", served_name}, {"object", "model"}, {"created", 0}, {"owned_by", "actorlm"},
                       {"max_model_len", model.max_model_len()}};
      r.set_content(nlohmann::json{{"object", "list"}, {"data", {m}}}.dump(), "application/json");
    });
    svr.Get("/health", [](const httplib::Request&, httplib::Response& r) { r.set_content("{\"status\":\"ok\"}", "application/json"); });
    svr.Get("/ready", [this](const httplib::Request&, httplib::Response& r) {
      std::string reason = engine_failure();
      if (reason.empty() && (draining || stopping)) reason = "draining";
      r.status = reason.empty() ? 200 : 503;
      r.set_content(reason.empty() ? nlohmann::json{{"ready", true}}.dump()
                                   : nlohmann::json{{"ready", false}, {"reason", reason}}.dump(),
                    "application/json");
    });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
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
      r.set_content(metrics.render(stats.counts, kv, !draining && !stopping && stats.healthy, stats.healthy),
                    "text/plain; version=0.0.4; charset=utf-8");
    });
    // Bodies for the errors httplib answers itself (unknown path, body too large...).
    svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      if (r.status == 404) send_error(r, ApiError{404, "no route for " + q.method + " " + q.path, "invalid_request_error", "", "not_found"});
      else if (r.status == 413) send_error(r, ApiError{413, "the request body is larger than server.max_body_bytes", "invalid_request_error", "", "body_too_large"});
      else send_error(r, ApiError{r.status, "HTTP error " + std::to_string(r.status), "invalid_request_error", "", ""});
      return httplib::Server::HandlerResponse::Handled;
    }));
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      spdlog::error("internal error: {}", what);
      send_error(r, ApiError{500, "internal error: " + what, "server_error", "", "internal_error"});
    });
  }

  void access_log(const std::string& id, int status, const CompletionSession* s, Clock::time_point t0, const CompletionRequest* req) {
    metrics.record_http_status(status);
    const double ttft = s && s->first_token() != Clock::time_point{} ? std::chrono::duration<double>(s->first_token() - t0).count() : -1;
    std::string prompt;
    if (cfg.server.log_prompts && req) {
      for (const auto& p : req->prompts) prompt += p.is_tokens ? "<" + std::to_string(p.tokens.size()) + " token ids>" : p.text;
      for (const auto& m : req->messages) prompt += "[" + m.role + "] " + m.content + " ";
      prompt = " prompt=" + nlohmann::json(prompt).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    spdlog::info("{} engine_id={} status={} prompt_tokens={} output_tokens={} ttft={:.3f}s total={:.3f}s{}", id,
                 s ? s->first_request_id() : 0, status, s ? s->prompt_tokens() : 0, s ? s->completion_tokens() : 0, ttft, since(t0),
                 prompt);
  }

  void complete(Endpoint ep, const httplib::Request& q, httplib::Response& res);
  void complete_json(CompletionSession&, const ResponseMeta&, Clock::time_point t0, const httplib::Request&,
                     httplib::Response&);
  void complete_stream(std::shared_ptr<CompletionSession>, const ResponseMeta&, Clock::time_point t0,
                       httplib::Response&);
};

void HttpServer::Impl::complete(Endpoint ep, const httplib::Request& q, httplib::Response& res) {
  const auto t0 = Clock::now();
  const std::string id = (ep == Endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(response_ids.fetch_add(1));
  auto refuse = [&](const ApiError& e, const CompletionRequest* req = nullptr) {
    send_error(res, e);
    access_log(id, e.status, nullptr, t0, req);
  };
  if (auto e = gate(q)) return refuse(*e);
  auto parsed = parse_request(ep, q.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return refuse(*e);
  auto& req = std::get<CompletionRequest>(parsed);
  if (req.model != served_name && req.model != response_name)
    return refuse(ApiError{404, "model: \"" + req.model + "\" is not served here; this server serves \"" + served_name + "\"",
                           "invalid_request_error", "model", "model_not_found"}, &req);
  auto session = std::make_shared<CompletionSession>(sys, model, std::move(req), engine_ids);
  if (auto e = session->start()) return refuse(*e, &session->request());

  const ResponseMeta meta{ep, id, std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
                          response_name};
  // The engine's id of the first prompt's request: joins client-side timings to /metrics-side
  // records (bench serve) and to the access log.
  res.set_header("X-Request-Id", std::to_string(session->first_request_id()));
  if (session->request().stream) return complete_stream(std::move(session), meta, t0, res);
  complete_json(*session, meta, t0, q, res);
}

// A non-streamed completion runs to its end before anything is written, so that a failure can
// still be a 500. The client's socket is watched meanwhile (it cannot be written to).
void HttpServer::Impl::complete_json(CompletionSession& session, const ResponseMeta& meta, Clock::time_point t0,
                                     const httplib::Request& q, httplib::Response& res) {
  ++in_flight;
  struct Leave {
    std::atomic<std::size_t>& n;
    ~Leave() { --n; }
  } leave{in_flight};
  const ClientSocket client(q);
  auto last_check = Clock::now();
  auto alive = [&] {
    if (stopping) return false;
    last_check = Clock::now();
    return client.connected();
  };
  const auto& r = session.request();
  std::vector<ChoiceResult> results(session.choices());
  auto emit = [&](const ChoiceDelta& d) {
    auto& c = results[d.index];
    c.text += d.text;
    c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.finish_reason) c.finish_reason = *d.finish_reason;
    return !stopping && (Clock::now() - last_check < kHeartbeat || alive());
  };
  int status = 200;
  if (session.run(emit, alive)) {
    res.set_content(completion_json(meta, results, r.logprobs, {session.prompt_tokens(), session.completion_tokens()}),
                    "application/json");
  } else if (!session.failure().empty()) {
    status = 500;
    send_error(res, ApiError{500, session.failure(), "server_error", "", "engine_failure"});
    spdlog::error("{}: {}", meta.id, session.failure());
  } else {
    status = 499;  // the client closed the connection (nginx's convention); nobody reads this
    res.status = 499;
  }
  access_log(meta.id, status, &session, t0, &r);
}

void HttpServer::Impl::complete_stream(std::shared_ptr<CompletionSession> session, const ResponseMeta& meta,
                                       Clock::time_point t0, httplib::Response& res) {
  ++in_flight;
  auto provider = [this, session, meta, t0](std::size_t, httplib::DataSink& sink) {
    const auto& r = session->request();
    auto last_write = Clock::now();
    auto write = [&](const std::string& s) {
      last_write = Clock::now();
      return sink.write(s.data(), s.size());
    };
    // A client that left is found by writing to it: an SSE comment.
    auto alive = [&] {
      if (stopping) return false;
      if (Clock::now() - last_write < kHeartbeat) return true;
      return write(": keep-alive\n\n");
    };
    std::vector<bool> opened(session->choices(), false);
    auto emit = [&](const ChoiceDelta& d) {
      if (stopping) return false;
      if (r.endpoint == Endpoint::chat && !opened[d.index]) {
        opened[d.index] = true;
        if (!write("data: " + chunk_json(meta, d, r.logprobs, r.include_usage, true) + "\n\n")) return false;
      }
      return write("data: " + chunk_json(meta, d, r.logprobs, r.include_usage) + "\n\n");
    };
    const bool ok = session->run(emit, alive);
    int status = 200;
    if (ok) {
      if (r.include_usage)
        write("data: " + usage_chunk_json(meta, {session->prompt_tokens(), session->completion_tokens()}) + "\n\n");
      write("data: [DONE]\n\n");
    } else if (!session->failure().empty()) {
      // Headers are out (200): the error is an event of its own, then the stream ends as usual.
      status = 500;
      const ApiError e{500, session->failure(), "server_error", "", "engine_failure"};
      write("data: " + e.to_json() + "\n\n");
      write("data: [DONE]\n\n");
      spdlog::error("{}: {}", meta.id, session->failure());
    } else {
      status = 499;  // the client closed the connection (nginx's convention)
    }
    sink.done();
    access_log(meta.id, status, session.get(), t0, &r);
    return true;
  };
  res.set_chunked_content_provider("text/event-stream", provider, [this](bool) { --in_flight; });
  res.set_header("Cache-Control", "no-cache");
}

HttpServer::HttpServer(caf::actor_system& sys, serving::ServedModel& model, const config::Config& cfg)
    : impl_(std::make_unique<Impl>(sys, model, cfg)) {
  auto& s = impl_->svr;
  const auto threads = static_cast<std::size_t>(cfg.server.threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(static_cast<std::size_t>(cfg.server.max_body_bytes));
  s.set_keep_alive_timeout(5);
  // Tokens are small writes: without TCP_NODELAY, Nagle's algorithm holds each one until the
  // client's (delayed, up to 40 ms) ACK of the previous one.
  s.set_tcp_nodelay(true);
  // httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once overflows
  // it, their requests are dropped and retransmitted, and httplib closes a connection whose
  // request has not arrived 5 s after accept. Keep the socket to raise the backlog after bind.
  s.set_socket_options([this](int fd) {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // restart without TIME_WAIT trouble
    impl_->listen_fd = fd;
  });
  s.set_write_timeout(30);
  impl_->routes();
}

HttpServer::~HttpServer() {
  stop();
  impl_->stop_pump();
}

int HttpServer::bind() {
  auto& s = impl_->svr;
  const auto& c = impl_->cfg.server;
  int port = static_cast<int>(c.port);
  if (port == 0) port = s.bind_to_any_port(c.host);
  else if (!s.bind_to_port(c.host, port)) port = -1;
  if (port <= 0)
    throw std::runtime_error("cannot listen on " + c.host + ":" + std::to_string(c.port) +
                             " (address in use, or not an address of this machine?)");
  if (impl_->listen_fd >= 0) ::listen(impl_->listen_fd, SOMAXCONN);
  return port;
}

void HttpServer::serve() {
  impl_->start_pump();
  impl_->svr.listen_after_bind();
}

void HttpServer::begin_drain() { impl_->draining = true; }

void HttpServer::observe_records(std::function<void(const std::vector<scheduler::RequestRecord>&)> observer) {
  impl_->observer = std::move(observer);
}

std::size_t HttpServer::in_flight() const { return impl_->in_flight; }

void HttpServer::stop() {
  impl_->stopping = true;
  if (impl_->svr.is_running()) impl_->svr.stop();
}

}  // namespace actorlm::http
