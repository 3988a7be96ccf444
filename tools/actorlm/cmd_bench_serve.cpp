// `actorlm bench serve`: the HTTP front end's added latency per token (see serve_bench.hpp),
// and the hidden `actorlm bench load-client` that runs its clients in a process of their own.
#include "tools/actorlm/commands.hpp"
#include "tools/bench/load_commands.hpp"
#include "tools/bench/serve_bench.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

namespace actorlm::tools {

namespace {

nlohmann::json to_json(const bench::ServeBenchPoint& p) {
  nlohmann::json j = {{"streams", p.streams},
                      {"tokens", p.tokens},
                      {"failed", p.failed},
                      {"seconds", p.seconds},
                      {"tokens_per_s", p.tokens_per_s},
                      {"overhead_us_p50", p.overhead_p50_us},
                      {"overhead_us_p99", p.overhead_p99_us},
                      {"overhead_us_max", p.overhead_max_us},
                      {"server_cpu_s", p.server_cpu_s},
                      {"server_cpu_us_per_token", p.server_cpu_us_per_token},
                      {"client_cpu_s", p.client_cpu_s},
                      {"client_lag_us_p50", p.client_lag_p50_us},
                      {"client_lag_us_p99", p.client_lag_p99_us},
                      {"step_interval_us", p.step_interval_us}};
  if (p.floor.measured)
    j["send_floor"] = {{"tokens", p.floor.tokens},
                       {"failed", p.floor.failed},
                       {"overhead_us_p50", p.floor.p50_us},
                       {"overhead_us_p99", p.floor.p99_us},
                       {"overhead_us_max", p.floor.max_us},
                       {"send_cpu_us_per_token", p.floor.send_cpu_us_per_token},
                       {"interval_us", p.floor.interval_us},
                       {"client_cpu_s", p.floor.client_cpu_s}};
  return j;
}

// The headline figures are the 256-stream level's (the goal); without that level, the
// largest level under 256, else the smallest; "headline_streams" says which.
const bench::ServeBenchPoint* headline(const std::vector<bench::ServeBenchPoint>& points) {
  const bench::ServeBenchPoint* best = nullptr;
  for (const auto& p : points)
    if (p.streams <= 256 && (!best || p.streams > best->streams)) best = &p;
  if (!best)
    for (const auto& p : points)
      if (!best || p.streams < best->streams) best = &p;
  return best;
}

int report_serve_bench(bench::ServeBenchOptions opt) {
  opt.progress = [](const std::string& line) { spdlog::info("bench serve: {}", line); };
  try {
    const auto r = bench::run_serve_bench(opt);
    nlohmann::json j = {{"bench", "serve"},
                        {"clients", "separate process (pid " + std::to_string(r.client_pid) + "), one event-driven thread"},
                        {"max_tokens", opt.max_tokens},
                        {"served", r.served}};
    nlohmann::json levels = nlohmann::json::array();
    for (const auto& p : r.points) {
      levels.push_back(to_json(p));
      const auto n = std::to_string(p.streams);
      j["overhead_us_per_token_p50_" + n] = p.overhead_p50_us;
      j["overhead_us_per_token_p99_" + n] = p.overhead_p99_us;
      j["server_cpu_us_per_token_" + n] = p.server_cpu_us_per_token;
      if (p.floor.measured) {
        j["send_floor_us_per_token_p50_" + n] = p.floor.p50_us;
        j["send_floor_us_per_token_p99_" + n] = p.floor.p99_us;
      }
    }
    j["levels"] = levels;
    if (const auto* h = headline(r.points)) {
      j["headline_streams"] = h->streams;
      j["overhead_us_per_token_p50"] = h->overhead_p50_us;
      j["overhead_us_per_token_p99"] = h->overhead_p99_us;
      j["server_cpu_us_per_token"] = h->server_cpu_us_per_token;
      if (h->floor.measured) j["send_floor_us_per_token_p99"] = h->floor.p99_us;
    }
    j["max_streams_sustained"] = r.max_streams_sustained;
    if (opt.slow_connections > 0) {
      j["slow_connections"] = opt.slow_connections;
      j["health_ms_with_slow_connections"] = r.health_ms_median;  // the median
      if (opt.slow_connections == 2000) j["health_ms_with_2000_slow_connections"] = r.health_ms_median;
      j["health"] = {{"ms", r.health_ms}, {"status", r.health_status}, {"slow_held", r.slow_held}};
    }
    std::cout << j.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench serve: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

void add_bench_serve_command(CLI::App& bench, int& exit_code) {
  auto opt = std::make_shared<bench::ServeBenchOptions>();
  opt->config = bench::default_serve_bench_config();
  auto* s = bench.add_subcommand(
      "serve", "HTTP front end: per-token latency added on top of the modelled step times (sim backend, wall clock, "
               "Falcon-40B on g5.48xlarge), the clients in a separate process; then GET /health with slow "
               "connections held");
  s->add_option("--streams", opt->streams, "Concurrent streaming clients, one measurement each")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1u, 8192u));
  s->add_option("--max-tokens", opt->max_tokens, "Tokens per stream")->capture_default_str()->check(CLI::Range(2u, 4096u));
  s->add_option("--slow-connections", opt->slow_connections,
                "Half-sent connections held while GET /health is timed (0: skip)")
      ->capture_default_str()->check(CLI::Range(0u, 16000u));
  s->add_option("--health-samples", opt->health_samples, "GET /health requests timed")
      ->capture_default_str()->check(CLI::Range(1u, 100u));
  s->add_flag("!--no-send-floor", opt->send_floor,
              "Skip each level's send floor (the same streams served by threads that only send(); on by default)");
  s->add_option("--caf-threads", opt->caf_threads, "CAF scheduler threads (0: CAF's default)")->capture_default_str();
  s->add_option("--io-threads", opt->config.server.io_threads, "The server's event-loop threads (server.io_threads)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  s->callback([opt, &exit_code] { exit_code = report_serve_bench(*opt); });

  // The client process of bench serve and bench soak: JSON-line commands on stdin.
  auto* client = bench.add_subcommand("load-client", "");
  client->group("");  // hidden: started by the benchmarks themselves
  client->callback([&exit_code] { exit_code = bench::run_load_commands(std::cin, std::cout); });
}

}  // namespace actorlm::tools
