// `actorlm bench soak`: mixed load with aborts and disconnects; exits 1 when a KV block or a
// request was lost (see soak_bench.hpp).
#include "tools/actorlm/commands.hpp"
#include "tools/bench/serve_bench.hpp"
#include "tools/bench/soak_bench.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

namespace actorlm::tools {

namespace {

int report_soak(bench::SoakOptions opt, double minutes, double seconds) {
  opt.seconds = seconds > 0 ? seconds : minutes * 60;
  opt.progress = [](const std::string& line) { spdlog::info("bench soak: {}", line); };
  try {
    const auto r = bench::run_soak_bench(opt);
    const auto& c = r.counts;
    const nlohmann::json j = {
        {"bench", "soak"},
        {"clients", "separate process (pid " + std::to_string(r.client_pid) + "), one event-driven thread"},
        {"served", r.served},
        {"seconds", r.seconds},
        {"concurrency", opt.concurrency},
        {"requests_sent", c.sent},
        {"requests_finished", c.finished},
        {"requests_errored", c.errored},
        {"requests_aborted", c.aborted},
        {"requests_disconnected", c.disconnected},
        {"requests_lost", c.lost},
        {"drained", r.drained},
        {"drain_seconds", r.drain_seconds},
        {"blocks_in_use_at_end", r.blocks_in_use_at_end},
        {"sequences_at_end", r.sequences_at_end},
        {"in_flight_at_end", r.in_flight_at_end},
        {"rss_kib_start", r.rss_start_kib},
        {"rss_kib_end", r.rss_end_kib},
        {"rss_kib_first_progress", r.rss_first_progress_kib},
        {"ok", r.ok()}};
    std::cout << j.dump() << std::endl;
    if (!r.ok())
      std::cerr << "bench soak: FAILED: " << (c.lost ? std::to_string(c.lost) + " requests lost; " : "")
                << r.blocks_in_use_at_end << " KV blocks and " << r.in_flight_at_end << " requests still held at the end\n";
    return r.ok() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "bench soak: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

void add_bench_soak_command(CLI::App& bench, int& exit_code) {
  struct Args {
    bench::SoakOptions opt;
    double minutes = 1;
    double seconds = 0;
  };
  auto a = std::make_shared<Args>();
  a->opt.config = bench::default_serve_bench_config();
  auto* s = bench.add_subcommand(
      "soak", "Mixed streamed and non-streamed load with aborts and client disconnects (sim backend, wall clock, "
              "clients in a separate process); fails when KV blocks or requests are lost");
  auto* minutes = s->add_option("--minutes", a->minutes, "Minutes of load")->capture_default_str()->check(CLI::Range(0.0, 1440.0));
  s->add_option("--seconds", a->seconds, "Seconds of load (instead of --minutes)")
      ->check(CLI::Range(0.1, 86400.0))->excludes(minutes);
  s->add_option("--concurrency", a->opt.concurrency, "Requests at a time")->capture_default_str()->check(CLI::Range(1u, 8192u));
  s->add_option("--max-tokens", a->opt.max_tokens, "Most tokens a request asks for")
      ->capture_default_str()->check(CLI::Range(4u, 4096u));
  s->add_option("--seed", a->opt.seed, "Seed of the request mix")->capture_default_str();
  s->add_option("--caf-threads", a->opt.caf_threads, "CAF scheduler threads (0: CAF's default)")->capture_default_str();
  s->callback([a, &exit_code] { exit_code = report_soak(a->opt, a->minutes, a->seconds); });
}

}  // namespace actorlm::tools
