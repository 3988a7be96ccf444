// actorlm serve: the daemon. Loads the configured model (the embedded default config: the cpu
// backend with the default model), serves the OpenAI-compatible API, and drains on SIGTERM or
// SIGINT: readiness off, new requests refused with 503, requests in flight finished (up to
// server.drain_timeout_s), exit 0. A second signal exits at once. When the engine turns
// unhealthy (a shard actor or the block manager is lost: its requests have already ended with an
// error), it logs why, drains the same way and exits with code 3, for a supervisor to restart it;
// with [cluster] workers it keeps serving instead (503 until the workers are back: the cluster
// supervisor re-creates the lost ranks).
#include "actors/http/http_server.hpp"
#include "actors/serving/served_model.hpp"
#include "actors/config/config.hpp"
#include "tools/actorlm/commands.hpp"

#include <CLI/CLI.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <thread>

#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

namespace actorlm::tools {

namespace {

struct ServeOptions {
  std::string config_file, host, model;
  std::int64_t port = -1;
};

// SIGTERM/SIGINT land in a handler that only writes the signal number to a pipe (any thread
// may run it: OpenBLAS starts its threads before main, so masking signals cannot route them);
// the watcher thread reads the pipe and drains.
int signal_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &b, 1);
}

// The next signal, or -1 when none arrived within `ms`.
int next_signal(int ms) {
  pollfd p{signal_pipe[0], POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return -1;
  unsigned char b = 0;
  return ::read(signal_pipe[0], &b, 1) == 1 ? int(b) : -1;
}

constexpr int exit_engine_failed = 3;
constexpr std::chrono::seconds failure_linger{1};

// Why the engine cannot serve any more; empty while it is healthy.
std::string engine_failure(engine::Engine& engine) {
  try {
    return engine.stats().failure;
  } catch (const std::exception& e) {
    return std::string("the scheduler is gone: ") + e.what();
  }
}

// Waits for a signal or an unhealthy engine (polled every 250 ms), then drains and stops the
// server; `exit_code` becomes 0 after a signal, exit_engine_failed after an engine failure.
void watch(http::HttpServer& server, engine::Engine& engine, bool recovers, double drain_timeout_s,
           const std::atomic<bool>& done, int& exit_code) {
  int sig = -1;
  std::string failure;
  for (int tick = 1; !done; ++tick) {
    if ((sig = next_signal(50)) >= 0) break;
    if (tick % 5 != 0) continue;
    failure = engine_failure(engine);
    if (!failure.empty() && !recovers) break;
  }
  if (done) return;
  if (sig >= 0) {
    spdlog::info("{}: draining: no new requests, {} in flight get up to {:.0f} s to finish (signal again to exit now)",
                 strsignal(sig), server.in_flight(), drain_timeout_s);
  } else {
    exit_code = exit_engine_failed;
    spdlog::error("the engine cannot serve any more: {}. Its requests have ended with an error; draining {} "
                  "responses and exiting with code {} for a supervisor to restart the server",
                  failure, server.in_flight(), exit_engine_failed);
  }
  server.begin_drain();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(drain_timeout_s);
  // After an engine failure the server stays up at least failure_linger (answering /ready with
  // 503 and the reason, /metrics with actorlm_engine_healthy 0), so that probes and scrapers see
  // why before the process goes.
  const auto linger_until = start + (exit_code == exit_engine_failed ? failure_linger : std::chrono::seconds(0));
  while ((server.in_flight() > 0 && std::chrono::steady_clock::now() < deadline) ||
         std::chrono::steady_clock::now() < linger_until) {
    if (int again = next_signal(20); again > 0) {
      spdlog::warn("{} again: exiting now with {} requests in flight", strsignal(again), server.in_flight());
      spdlog::default_logger()->flush();
      _exit(128 + again);
    }
  }
  if (server.in_flight() > 0) spdlog::warn("drain timeout: aborting {} requests in flight", server.in_flight());
  server.stop();
}

int run_serve(const ServeOptions& o) {
  auto cfg = load_config_or_report(o.config_file);
  if (!cfg) return 1;
  if (!o.host.empty()) cfg->server.host = o.host;
  if (o.port >= 0) cfg->server.port = o.port;
  if (!o.model.empty()) cfg->model.path = o.model;

  // Every connection is a descriptor: the soft limit (often 1,024) up to the hard one.
  if (rlimit nofile{}; ::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
    if (nofile.rlim_cur != RLIM_INFINITY && static_cast<std::int64_t>(nofile.rlim_cur) < cfg->server.max_connections + 64)
      spdlog::warn("server.max_connections is {} but this process may open only {} descriptors (ulimit -n): "
                   "connections beyond that are refused by the kernel", cfg->server.max_connections, nofile.rlim_cur);
  }

  // A client that hangs up must not kill the process; SIGTERM/SIGINT start the drain.
  std::signal(SIGPIPE, SIG_IGN);
  if (::pipe(signal_pipe) != 0) {
    std::cerr << "serve: cannot create the signal pipe\n";
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  try {
    caf::actor_system_config sys_cfg;
    serving::configure_actor_system(sys_cfg, *cfg);
    caf::actor_system sys{sys_cfg};
    spdlog::info("loading model '{}' ({} backend)...", cfg->model.name, config::to_string(cfg->engine.backend));
    serving::ServedModel model(sys, *cfg);
    spdlog::info("serving {}", model.description());
    http::HttpServer server(sys, model, *cfg);
    const int port = server.bind();
    const std::string base = "http://" + cfg->server.host + ":" + std::to_string(port);
    spdlog::info("listening on {} (OpenAI API under /v1; /health, /ready, /metrics)", base);
    spdlog::info("try: curl {}/v1/chat/completions -H 'Content-Type: application/json'{} -d '{{\"model\": \"{}\", "
                 "\"messages\": [{{\"role\": \"user\", \"content\": \"What is the capital of France?\"}}]}}'",
                 base, cfg->server.api_key.empty() ? "" : " -H 'Authorization: Bearer $KEY'", cfg->model.name);
    std::atomic<bool> done{false};
    int exit_code = 0;
    std::thread watcher(watch, std::ref(server), std::ref(model.engine()), model.recovers_from_failures(),
                        cfg->server.drain_timeout_s, std::cref(done), std::ref(exit_code));
    server.serve();
    done = true;
    watcher.join();
    if (exit_code == 0) spdlog::info("stopped");
    else spdlog::error("stopped after an engine failure (exit code {})", exit_code);
    return exit_code;
  } catch (const std::exception& e) {
    std::cerr << "serve: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* s = app.add_subcommand(
      "serve", "Serve the OpenAI-compatible HTTP API (the built-in config: the cpu backend with the default model "
               "on 127.0.0.1:8000)");
  s->add_option("--config", o->config_file, "TOML config (default: the built-in configs/default.toml)");
  s->add_option("--host", o->host, "Address to listen on (overrides server.host)");
  s->add_option("--port", o->port, "Port to listen on, 0 for any free port (overrides server.port)")
      ->check(CLI::Range(0, 65535));
  s->add_option("--model", o->model, "GGUF file or HF safetensors folder (overrides model.path)");
  s->callback([o, &exit_code] { exit_code = run_serve(*o); });
}

}  // namespace actorlm::tools
