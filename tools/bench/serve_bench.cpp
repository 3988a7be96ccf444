#include "tools/bench/serve_bench.hpp"

#include "actors/serving/served_model.hpp"
#include "tools/bench/bench_server.hpp"
#include "tools/bench/client_process.hpp"
#include "tools/bench/send_floor.hpp"
#include "tools/bench/timing.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace actorlm::bench {

namespace {

using nlohmann::json;

// One stream as the client process saw it.
struct StreamTiming {
  std::uint64_t engine_id = 0;         // X-Request-Id (0: none came)
  std::vector<std::int64_t> token_ns;  // arrival of each token at the client
  bool done = false;                   // ended with [DONE]
};

// The engine's token times of finished requests, by request id, as the server hands them over
// (from its metrics pump, every 0.5 s).
class EngineTokenTimes {
 public:
  void add(const std::vector<scheduler::RequestRecord>& records) {
    std::lock_guard lock(mu_);
    for (const auto& r : records) times_[r.id] = r.token_times;
  }
  // Waits until every stream's record is in (or `timeout` passed), then calls f(engine, client)
  // for each stream that has one.
  template <class F>
  void join(const std::vector<StreamTiming>& streams, std::chrono::milliseconds timeout, F f) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      {
        std::lock_guard lock(mu_);
        const bool all = std::all_of(streams.begin(), streams.end(), [&](const auto& s) { return times_.count(s.engine_id); });
        if (all || std::chrono::steady_clock::now() > deadline) {
          for (const auto& s : streams)
            if (auto it = times_.find(s.engine_id); it != times_.end()) f(it->second, s);
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  std::mutex mu_;
  std::map<std::uint64_t, std::vector<scheduler::Time>> times_;
};

json stream_body(const ServeBenchOptions& opt) {
  return {{"model", opt.config.model.name}, {"prompt", "Tell me a story about a GPU."},
          {"max_tokens", opt.max_tokens}, {"stream", true}};
}

// The p50, p99 and largest of a level's per-token overheads (sorts `us`).
void spread(std::vector<double>& us, double& p50, double& p99, double& max) {
  p50 = percentile(us, 50);
  p99 = percentile(us, 99);
  max = us.empty() ? 0 : us.back();  // sorted by percentile()
}

// Reads the client process's answer to a "streams" command: a line per stream, then the end
// line, whose figures go into p.
std::vector<StreamTiming> receive_streams(ClientProcess& clients, ServeBenchPoint& p) {
  std::vector<StreamTiming> streams;
  for (;;) {
    const auto line = clients.receive(std::chrono::minutes(30));
    if (line.contains("error")) throw std::runtime_error("client process: " + line["error"].get<std::string>());
    if (line.contains("end")) {
      p.seconds = line["seconds"];
      p.client_cpu_s = line["client_cpu_s"];
      p.client_lag_p50_us = line["client_lag_us_p50"];
      p.client_lag_p99_us = line["client_lag_us_p99"];
      return streams;
    }
    StreamTiming s;
    const std::string id = line["request_id"];
    s.engine_id = id.empty() ? 0 : std::stoull(id);
    s.token_ns = line["token_ns"].get<std::vector<std::int64_t>>();
    s.done = line["done"];
    if (!s.done) ++p.failed;
    streams.push_back(std::move(s));
  }
}

// Runs one level: n streams at once from the client process, joined with the engine's records.
ServeBenchPoint measure_level(ClientProcess& clients, int port, std::uint32_t n, const ServeBenchOptions& opt,
                              EngineTokenTimes& engine) {
  ServeBenchPoint p;
  p.streams = n;
  const double cpu0 = process_cpu_seconds();
  clients.send({{"cmd", "streams"}, {"port", port}, {"n", n}, {"body", stream_body(opt)}});
  const auto streams = receive_streams(clients, p);
  p.server_cpu_s = process_cpu_seconds() - cpu0;
  std::vector<double> overhead_us, gaps_us;
  engine.join(streams, std::chrono::seconds(5), [&](const std::vector<scheduler::Time>& produced, const StreamTiming& s) {
    for (std::size_t k = 0; k < std::min(produced.size(), s.token_ns.size()); ++k)
      overhead_us.push_back(double(s.token_ns[k] - produced[k]) / 1e3);
    for (std::size_t k = 1; k < produced.size(); ++k) gaps_us.push_back(double(produced[k] - produced[k - 1]) / 1e3);
  });
  p.step_interval_us = median(gaps_us);
  p.tokens = overhead_us.size();
  p.tokens_per_s = p.seconds > 0 ? double(p.tokens) / p.seconds : 0;
  p.server_cpu_us_per_token = p.tokens > 0 ? p.server_cpu_s * 1e6 / double(p.tokens) : 0;
  spread(overhead_us, p.overhead_p50_us, p.overhead_p99_us, p.overhead_max_us);
  return p;
}

// The same level's send floor (send_floor.hpp): the same client process and request, answered
// by a SendFloor with the server's I/O thread count, at the level's step interval (at least
// 1 ms; p.floor.interval_us says which).
void measure_floor(ClientProcess& clients, SendFloor& floor, const ServeBenchOptions& opt, ServeBenchPoint& p) {
  ServeBenchPoint f;
  clients.send({{"cmd", "streams"}, {"port", floor.port()}, {"n", p.streams}, {"body", stream_body(opt)}});
  const auto interval = std::chrono::microseconds(std::llround(std::max(p.step_interval_us, 1000.0)));
  p.floor.interval_us = double(interval.count());
  const auto run = floor.serve(p.streams, opt.max_tokens, interval, opt.config.model.name);
  const auto streams = receive_streams(clients, f);
  std::vector<double> overhead_us;
  for (const auto& s : streams)
    for (std::size_t k = 0; k < std::min(run.step_ns.size(), s.token_ns.size()); ++k)
      overhead_us.push_back(double(s.token_ns[k] - run.step_ns[k]) / 1e3);
  p.floor.measured = true;
  p.floor.tokens = overhead_us.size();
  p.floor.failed = std::max(f.failed, run.failed);
  spread(overhead_us, p.floor.p50_us, p.floor.p99_us, p.floor.max_us);
  p.floor.send_cpu_us_per_token = p.floor.tokens > 0 ? run.send_cpu_s * 1e6 / double(p.floor.tokens) : 0;
  p.floor.client_cpu_s = f.client_cpu_s;
}

void measure_health(ClientProcess& clients, int port, const ServeBenchOptions& opt, ServeBenchResult& r) {
  clients.send({{"cmd", "health"}, {"port", port}, {"slow", opt.slow_connections}, {"samples", opt.health_samples}});
  const auto line = clients.receive(std::chrono::minutes(20));
  if (line.contains("error")) throw std::runtime_error("client process: " + line["error"].get<std::string>());
  r.health_ms = line["health_ms"].get<std::vector<double>>();
  r.health_status = line["status"].get<std::vector<int>>();
  r.slow_held = line["slow_held"].get<std::vector<std::uint32_t>>();
  r.health_ms_median = median(r.health_ms);
}

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

}  // namespace

config::Config default_serve_bench_config() {
  config::Config c;
  c.server.port = 0;
  c.server.max_connections = 100000;  // 1,024 streams and 2,000 slow connections at once
  c.engine.backend = config::Backend::sim;
  c.engine.tensor_parallel_degree = 8;
  c.engine.batching = config::Batching::paged;
  c.scheduler.max_num_seqs = 1024;
  c.scheduler.max_queue_len = 4096;
  c.model.name = "falcon-40b";
  c.model.preset = "falcon-40b";
  c.sim.instance = "g5.48xlarge";
  c.sim.hardware = "a10g";
  c.sim.clock = config::SimClock::wall;
  return c;
}

ServeBenchResult run_serve_bench(const ServeBenchOptions& opt) {
  auto say = [&](const std::string& s) { if (opt.progress) opt.progress(s); };
  raise_open_files_limit();
  EngineTokenTimes engine;
  BenchServer server(opt.config, opt.caf_threads,
                     [&](const std::vector<scheduler::RequestRecord>& records) { engine.add(records); });
  const int port = server.port();

  ServeBenchResult result;
  result.served = server.model().description();
  ClientProcess clients(opt.client_command.empty() ? default_client_command() : opt.client_command);
  result.client_pid = clients.pid();
  say("serving " + result.served + " on port " + std::to_string(port) +
      "; clients in a separate process (pid " + std::to_string(clients.pid()) + ", one event-driven thread)");
  // One stream, not reported, and a pause first: one-time start-up work (OpenBLAS's thread pool
  // spins on sched_yield for ~0.1 s after it loads, first touches of the server's memory) would
  // otherwise land in the first level's CPU per token (measured: 1,100-1,700 us at 1 stream
  // instead of ~310).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  measure_level(clients, port, 1, opt, engine);
  std::optional<SendFloor> floor;
  if (opt.send_floor) floor.emplace(static_cast<unsigned>(opt.config.server.io_threads));
  for (std::uint32_t n : opt.streams) {
    auto p = measure_level(clients, port, n, opt, engine);
    say(std::to_string(n) + " streams: " + std::to_string(p.tokens) + " tokens in " + fmt(p.seconds) +
        " s; overhead per token p50 " + fmt(p.overhead_p50_us) + " us, p99 " + fmt(p.overhead_p99_us) +
        " us; server CPU " + fmt(p.server_cpu_us_per_token) + " us per token; client CPU " + fmt(p.client_cpu_s * 1e3) +
        " ms, client read lag p99 " + fmt(p.client_lag_p99_us) + " us (not counted)" +
        (p.failed ? "; " + std::to_string(p.failed) + " streams failed" : ""));
    if (floor) {
      measure_floor(clients, *floor, opt, p);
      say(std::to_string(n) + " streams, send floor (" + std::to_string(opt.config.server.io_threads) +
          " threads sending the same chunks, one step every " + fmt(p.floor.interval_us / 1e3) +
          " ms; no engine, no HTTP server): p50 " + fmt(p.floor.p50_us) + " us, p99 " + fmt(p.floor.p99_us) +
          " us; send CPU " + fmt(p.floor.send_cpu_us_per_token) + " us per token; client CPU " +
          fmt(p.floor.client_cpu_s * 1e3) + " ms" +
          (p.floor.failed ? "; " + std::to_string(p.floor.failed) + " streams failed" : ""));
    }
    if (p.failed == 0 && p.tokens > 0 && p.overhead_p99_us < opt.p99_limit_us)
      result.max_streams_sustained = std::max(result.max_streams_sustained, n);
    result.points.push_back(p);
  }
  if (opt.slow_connections > 0) {
    measure_health(clients, port, opt, result);
    say("GET /health with " + std::to_string(opt.slow_connections) + " slow connections held: median " +
        fmt(result.health_ms_median) + " ms over " + std::to_string(result.health_ms.size()) + " samples");
  }
  return result;
}

}  // namespace actorlm::bench
