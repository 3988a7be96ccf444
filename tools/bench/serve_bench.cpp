#include "tools/bench/serve_bench.hpp"

#include "actors/http/http_server.hpp"
#include "actors/http/sse_parser.hpp"
#include "actors/serving/served_model.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

namespace actorlm::bench {

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One client's view of its stream: the engine's request id and each token's arrival time.
struct ClientStream {
  std::uint64_t engine_id = 0;
  std::vector<std::int64_t> arrivals;  // ns, one per token
  bool done = false;
};

// Streams one completion; the sim codec writes each token as " word", so a chunk's tokens
// are its spaces (a chunk holds several tokens when the client fell behind).
ClientStream stream_one(int port, std::uint32_t max_tokens, const std::string& model) {
  ClientStream out;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = nlohmann::json{{"model", model}, {"prompt", "Tell me a story about a GPU."},
                            {"max_tokens", max_tokens}, {"stream", true}}.dump();
  req.set_header("Content-Type", "application/json");
  http::SseParser sse;
  req.response_handler = [&](const httplib::Response& r) {
    const std::string id = r.get_header_value("X-Request-Id");
    out.engine_id = id.empty() ? 0 : std::stoull(id);
    return r.status == 200;
  };
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    const std::int64_t t = now_ns();
    for (const std::string& payload : sse.feed({data, n})) {
      if (payload == http::sse_done) {
        out.done = true;
        continue;
      }
      const auto j = nlohmann::json::parse(payload);
      const std::string text = j["choices"][0]["text"];
      for (char ch : text)
        if (ch == ' ') out.arrivals.push_back(t);
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  c.send(req, res, err);
  return out;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * double(v.size())));
  return v[std::max<std::size_t>(rank, 1) - 1];
}

}  // namespace

config::Config default_serve_bench_config() {
  config::Config c;
  c.server.port = 0;
  c.server.max_connections = 100000;
  c.engine.backend = config::Backend::sim;
  c.engine.tensor_parallel_degree = 8;
  c.engine.batching = config::Batching::paged;
  c.scheduler.max_num_seqs = 512;
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
  caf::actor_system_config sys_cfg;
  serving::register_engine_types(sys_cfg);
  if (opt.caf_threads > 0) sys_cfg.set("scheduler.max-threads", std::size_t{opt.caf_threads});
  caf::actor_system sys{sys_cfg};
  serving::ServedModel model(sys, opt.config);
  http::HttpServer server(sys, model, opt.config);
  std::mutex mu;
  std::map<std::uint64_t, std::vector<std::int64_t>> token_times;  // engine id -> ns
  server.observe_records([&](const std::vector<scheduler::RequestRecord>& records) {
    std::lock_guard lock(mu);
    for (const auto& r : records) token_times[r.id] = r.token_times;
  });
  const int port = server.bind();
  std::thread serving([&] { server.serve(); });
  ServeBenchResult result;
  result.served = model.description();
  say("serving " + result.served);

  for (std::uint32_t n : opt.streams) {
    std::vector<ClientStream> streams(n);
    std::barrier start(static_cast<std::ptrdiff_t>(n) + 1);
    std::vector<std::thread> clients;
    for (std::uint32_t i = 0; i < n; ++i)
      clients.emplace_back([&, i] {
        start.arrive_and_wait();
        streams[i] = stream_one(port, opt.max_tokens, opt.config.model.name);
      });
    start.arrive_and_wait();
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& t : clients) t.join();
    ServeBenchPoint p;
    p.streams = n;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The records reach the observer within the server's metrics period (0.5 s).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::vector<double> overhead_us;
    for (;;) {
      std::size_t joined = 0;
      {
        std::lock_guard lock(mu);
        for (const auto& s : streams) joined += token_times.count(s.engine_id);
      }
      if (joined == n || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    {
      std::lock_guard lock(mu);
      for (const auto& s : streams) {
        if (!s.done) ++p.failed;
        const auto it = token_times.find(s.engine_id);
        if (it == token_times.end()) continue;
        const auto& engine = it->second;
        for (std::size_t k = 0; k < std::min(engine.size(), s.arrivals.size()); ++k)
          overhead_us.push_back(double(s.arrivals[k] - engine[k]) / 1e3);
      }
    }
    p.tokens = overhead_us.size();
    p.tokens_per_s = p.seconds > 0 ? double(p.tokens) / p.seconds : 0;
    p.overhead_p50_us = percentile(overhead_us, 50);
    p.overhead_p99_us = percentile(overhead_us, 99);
    p.overhead_max_us = overhead_us.empty() ? 0 : overhead_us.back();
    say(std::to_string(n) + " streams: " + std::to_string(p.tokens) + " tokens in " + std::to_string(p.seconds) +
        " s; overhead per token p50 " + std::to_string(p.overhead_p50_us) + " us, p99 " + std::to_string(p.overhead_p99_us) +
        " us" + (p.failed ? ", " + std::to_string(p.failed) + " streams failed" : ""));
    if (p.failed == 0 && p.tokens > 0 && p.overhead_p99_us < opt.p99_limit_us)
      result.max_streams_sustained = std::max(result.max_streams_sustained, n);
    result.points.push_back(p);
  }
  server.stop();
  serving.join();
  return result;
}

}  // namespace actorlm::bench
