// `actorlm bench serve`: the HTTP front end's added latency per token (see serve_bench.hpp).
#include "tools/actorlm/commands.hpp"
#include "tools/bench/serve_bench.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

namespace actorlm::tools {

namespace {

int report_serve_bench(bench::ServeBenchOptions opt) {
  opt.progress = [](const std::string& line) { spdlog::info("bench serve: {}", line); };
  try {
    const auto r = bench::run_serve_bench(opt);
    nlohmann::json j = {{"bench", "serve"}, {"max_tokens", opt.max_tokens}, {"served", r.served}};
    nlohmann::json levels = nlohmann::json::array();
    double p50_at_max = 0, p99_at_max = 0;
    for (const auto& p : r.points) {
      levels.push_back({{"streams", p.streams}, {"tokens", p.tokens}, {"failed", p.failed}, {"seconds", p.seconds},
                        {"tokens_per_s", p.tokens_per_s}, {"overhead_us_p50", p.overhead_p50_us},
                        {"overhead_us_p99", p.overhead_p99_us}, {"overhead_us_max", p.overhead_max_us}});
      p50_at_max = p.overhead_p50_us;
      p99_at_max = p.overhead_p99_us;
    }
    j["levels"] = levels;
    j["streams_at_largest_level"] = r.points.empty() ? 0 : r.points.back().streams;
    j["overhead_us_per_token_p50"] = p50_at_max;  // at the largest level
    j["overhead_us_per_token_p99"] = p99_at_max;
    j["max_streams_sustained"] = r.max_streams_sustained;
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
               "Falcon-40B on g5.48xlarge), with 1 to 256 concurrent streaming clients");
  s->add_option("--streams", opt->streams, "Concurrent streaming clients, one measurement each")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1u, 4096u));
  s->add_option("--max-tokens", opt->max_tokens, "Tokens per stream")->capture_default_str()->check(CLI::Range(2u, 4096u));
  s->add_option("--caf-threads", opt->caf_threads, "CAF scheduler threads (0: CAF's default)")->capture_default_str();
  s->callback([opt, &exit_code] { exit_code = report_serve_bench(*opt); });
}

}  // namespace actorlm::tools
