// actorlm bench cluster: the cluster's control-plane overhead, bytes per step, failover and
// recovery, and cpu tensor parallelism across processes, with workers started on loopback
// (tools/bench/cluster_bench.hpp). Progress on stderr, one JSON line on stdout.
#include "tools/actorlm/commands.hpp"
#include "tools/bench/cluster_bench.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

namespace actorlm::tools {

namespace {

int run_bench_cluster(bench::ClusterBenchOptions opt) {
  opt.progress = [](const std::string& line) { spdlog::info("bench cluster: {}", line); };
  const auto r = bench::run_cluster_bench(opt);
  const std::string n = std::to_string(opt.running);
  nlohmann::json j = {{"bench", "cluster"},
                      {"steps", opt.steps},
                      {"remote_step_overhead_us_" + n, r.remote_step_overhead_us},
                      {"remote_step_p90_us_" + n, r.remote_step_p90_us},
                      {"in_process_step_overhead_us_" + n, r.local_step_overhead_us},
                      {"in_process_step_p90_us_" + n, r.local_step_p90_us},
                      {"step_bytes_" + n, r.step_bytes},
                      {"failover_seconds", r.failover_seconds},
                      {"recovery_seconds", r.recovery_seconds}};
  for (const auto& p : r.cpu) {
    const std::string c = std::to_string(p.concurrency), k = "cpu_" + p.parallelism;
    j[k + "_one_process_tokens_per_s_" + c] = p.one_process_tokens_per_s;
    j[k + "_two_processes_tokens_per_s_" + c] = p.two_processes_tokens_per_s;
    j[k + "_two_over_one_" + c] = p.two_processes_tokens_per_s / p.one_process_tokens_per_s;
  }
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace

void add_bench_cluster_command(CLI::App& bench, int& exit_code) {
  auto opt = std::make_shared<bench::ClusterBenchOptions>();
  auto* c = bench.add_subcommand(
      "cluster", "Cluster costs with 2 workers started on loopback: control-plane time per decode step at 256 "
                 "sequences (zero-cost sim shards) beside the same engine in one process, bytes on the wire per step, "
                 "failover and recovery after a SIGKILLed worker, cpu TP 3 and a 3-stage layer split across 2 processes vs 1 "
                 "at 1 and 32 requests");
  c->add_option("--steps", opt->steps, "Decode iterations measured")->capture_default_str()->check(CLI::Range(10u, 4'000u));
  c->add_option("--running", opt->running, "Sequences decoding in the overhead measurement")
      ->capture_default_str()->check(CLI::Range(1u, 4096u));
  c->add_option("--cpu-tokens", opt->cpu_tokens, "Tokens per request in the cpu comparison")
      ->capture_default_str()->check(CLI::Range(1u, 4096u));
  c->add_option("--concurrency", opt->concurrency, "Concurrent requests of the cpu comparison")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1u, 1024u));
  c->add_flag("!--no-cpu", opt->cpu, "Skip the cpu comparison (the default model is not loaded)");
  c->callback([opt, &exit_code] {
    try {
      exit_code = run_bench_cluster(*opt);
    } catch (const std::exception& e) {
      spdlog::error("bench cluster: {}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace actorlm::tools
