#pragma once
// The OpenAI-compatible HTTP front end (cpp-httplib): routes, bearer-token check, body limit,
// readiness and drain, Prometheus metrics, access log. Each connection is served by a thread
// of the server's pool, which blocks on its request's channel while the engine works.

#include "actors/config/config.hpp"
#include "actors/scheduler/request.hpp"

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace caf { class actor_system; }
namespace actorlm::serving { class ServedModel; }

namespace actorlm::http {

class HttpServer {
 public:
  HttpServer(caf::actor_system&, serving::ServedModel&, const config::Config&);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds server.host:server.port (port 0: any free port); returns the port. Throws
  // std::runtime_error when the address cannot be bound.
  int bind();
  // Serves until stop(); call after bind().
  void serve();
  // Readiness off: new API requests get 503; requests in flight go on.
  void begin_drain();
  // Also hands every batch of finished requests' records (drained from the engine for the
  // metrics) to `observer`; set before serve(). For benchmarks that join client-side timings.
  void observe_records(std::function<void(const std::vector<scheduler::RequestRecord>&)> observer);
  // Requests being answered now.
  std::size_t in_flight() const;
  // Aborts requests still in flight (their clients get what was generated so far or an error)
  // and stops serving: serve() returns once the handlers have finished.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace actorlm::http
