// `actorlm bench kv`: prints progress on stderr and one JSON object as the last stdout line.
#include "tools/actorlm/commands.hpp"
#include "tools/bench/cpu_bench.hpp"
#include "tools/bench/kv_bench.hpp"
#include "tools/bench/scheduler_bench.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <map>
#include <utility>
#include <memory>

namespace actorlm::tools {

namespace {
nlohmann::json to_json(const bench::ReplayResult& r) {
  return {{"utilization", r.utilization}, {"steps", r.steps}, {"mean_running", r.mean_running},
          {"max_running", r.max_running}, {"preemptions", r.preemptions}};
}

int run_kv(const bench::KvBenchOptions& opt_in) {
  auto opt = opt_in;
  opt.progress = [](const std::string& line) { spdlog::info("bench kv: {}", line); };
  const auto r = bench::run_kv_bench(opt);
  nlohmann::json j = {
      {"bench", "kv"},
      {"append_256_us", r.append_256_us},
      {"append_1024_us", r.append_1024_us},
      {"allocate_2k_prefix_us", r.allocate_2k_prefix_us},
      {"utilization_paged", r.paged.utilization},
      {"utilization_reserved", r.reserved.utilization},
      {"utilization_reserved_oracle", r.reserved_oracle.utilization},
      {"replay",
       {{"requests", opt.replay_requests},
        {"device_blocks", opt.replay_device_blocks},
        {"block_size", opt.block_size},
        {"max_len", opt.max_len},
        {"seed", opt.seed},
        {"paged", to_json(r.paged)},
        {"reserved", to_json(r.reserved)},
        {"reserved_oracle", to_json(r.reserved_oracle)}}}};
  std::cout << j.dump() << std::endl;
  return 0;
}
int run_scheduler(std::uint32_t steps, std::uint32_t threads) {
  bench::SchedulerBenchOptions opt;
  opt.steps = steps;
  opt.threads = threads;
  opt.progress = [](const std::string& line) { spdlog::info("bench scheduler: {}", line); };
  const auto points = bench::run_scheduler_bench(opt);
  nlohmann::json j = {{"bench", "scheduler"}, {"steps", steps}, {"caf_threads", threads}};
  for (const auto& p : points) {
    const std::string n = std::to_string(p.running);
    j["step_overhead_us_" + n] = p.step_overhead_us;
    j["step_p90_us_" + n] = p.p90_us;
    j["policy_step_us_" + n] = p.policy_step_us;
    j["measured_steps_" + n] = p.steps;
    j["step_bytes_" + n] = p.step_bytes;
    j["step_bytes_full_format_" + n] = p.step_bytes_full_format;
  }
  std::cout << j.dump() << std::endl;
  return 0;
}
int run_cpu(bench::CpuBenchOptions opt) {
  opt.progress = [](const std::string& line) { spdlog::info("bench cpu: {}", line); };
  const auto r = bench::run_cpu_bench(opt);
  nlohmann::json j = {{"bench", "cpu"}, {"model", r.model}, {"requests", opt.requests},
                      {"max_tokens", opt.max_tokens}, {"prompt_tokens", r.prompt_tokens},
                      {"tensor_parallel_degree", opt.config.engine.tensor_parallel_degree},
                      {"pipeline_parallel_degree", opt.config.engine.pipeline_parallel_degree},
                      {"read_bandwidth_gb_s", r.read_bytes_per_s / 1e9}, {"bandwidth_threads", r.threads}};
  // The stored-weights path with the configured KV dtype under the plain names; the f32 weights
  // path with the suffix _f32, another KV dtype with _kv_<dtype> after it.
  const config::CacheDtype kv_default = opt.config.cache.dtype;
  j["kv_dtype"] = config::to_string(kv_default);
  std::map<std::pair<config::CpuWeights, config::CacheDtype>, std::map<std::uint32_t, double>> at;
  for (const auto& p : r.paths) {
    const std::string suffix = (p.weights == config::CpuWeights::stored ? "" : "_" + std::string(config::to_string(p.weights))) +
                               (p.kv_dtype == kv_default ? "" : "_kv_" + std::string(config::to_string(p.kv_dtype)));
    auto& rates = at[{p.weights, p.kv_dtype}];
    j["kv_blocks" + suffix] = p.kv_blocks;
    j["weight_bytes" + suffix] = p.weight_bytes;
    j["weight_bytes_per_token" + suffix] = p.weight_bytes_per_token;
    for (const auto& e : p.engine) {
      const std::string c = std::to_string(e.concurrency);
      j["tokens_per_s_" + c + suffix] = e.tokens_per_s;
      j["median_ttft_s_" + c + suffix] = e.median_ttft_s;
      rates[e.concurrency] = e.tokens_per_s;
    }
    if (!opt.sequential_baseline) continue;
    j["tokens_per_s_one_at_a_time" + suffix] = p.sequential_tokens_per_s;
    j["decode_tokens_per_s_1" + suffix] = p.decode_tokens_per_s;
    // Weight bytes a single stream reads per second over what the memory delivers.
    j["bandwidth_fraction_1" + suffix] = p.decode_tokens_per_s * double(p.weight_bytes_per_token) / r.read_bytes_per_s;
    j["decode_attention_us_" + std::to_string(bench::decode_attention_positions) + suffix] = p.decode_attention_s * 1e6;
    if (opt.prefill_tokens > 0) j["prefill_tokens_per_s_" + std::to_string(opt.prefill_tokens) + suffix] = p.prefill_tokens_per_s;
    if (rates.count(32) && p.sequential_tokens_per_s > 0)
      j["batching_speedup_32" + suffix] = rates[32] / p.sequential_tokens_per_s;
  }
  const auto ratios = [&](const std::string& name, const auto& num, const auto& den) {
    for (const auto& [c, v] : num)
      if (den.count(c) && den.at(c) > 0) j[name + std::to_string(c)] = v / den.at(c);
  };
  ratios("speedup_over_f32_", at[{config::CpuWeights::stored, kv_default}], at[{config::CpuWeights::f32, kv_default}]);
  ratios("kv_f16_over_f32_", at[{config::CpuWeights::stored, config::CacheDtype::f16}],
         at[{config::CpuWeights::stored, config::CacheDtype::f32}]);
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (figures are reported, not asserted)");
  bench->require_subcommand(1);
  add_bench_serve_command(*bench, exit_code);
  add_bench_soak_command(*bench, exit_code);
  add_bench_client_command(*bench, exit_code);
  add_bench_fidelity_command(*bench, exit_code);
  add_bench_sim_command(*bench, exit_code);
  add_bench_cluster_command(*bench, exit_code);
  auto opt = std::make_shared<bench::KvBenchOptions>();
  auto* kv = bench->add_subcommand(
      "kv", "Block manager: append and prefix-allocate latency, paged vs reserved utilization");
  kv->add_option("--requests", opt->replay_requests, "Requests in the utilization replay")
      ->capture_default_str()
      ->check(CLI::Range(1u, 10'000'000u));
  kv->add_option("--device-blocks", opt->replay_device_blocks, "KV blocks in the replay's cache")
      ->capture_default_str()
      ->check(CLI::Range(256u, 100'000'000u));
  kv->add_option("--seed", opt->seed, "Random seed")->capture_default_str();
  kv->callback([opt, &exit_code] { exit_code = run_kv(*opt); });

  auto steps = std::make_shared<std::uint32_t>(300);
  auto* sched = bench->add_subcommand(
      "scheduler", "Engine iteration overhead (plan, KV and shard round trips, delivery) with "
                   "zero-cost shards at 256 and 1,024 running sequences");
  sched->add_option("--steps", *steps, "Decode iterations measured per size")
      ->capture_default_str()
      ->check(CLI::Range(10u, 100'000u));
  auto threads = std::make_shared<std::uint32_t>(2);
  sched->add_option("--threads", *threads, "CAF scheduler threads")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  auto cpu_opt = std::make_shared<bench::CpuBenchOptions>();
  auto cpu_config = std::make_shared<std::string>();
  auto concurrency = std::make_shared<std::vector<std::uint32_t>>(cpu_opt->concurrency);
  auto* cpu = bench->add_subcommand(
      "cpu", "cpu backend on a real model: output tokens/s through the engine at 1, 8, 32 and 64 "
             "concurrent requests, the same requests one at a time without batching, a 512-token "
             "prefill and the memory read bandwidth; weights as stored and dequantized to f32 (and KV cache dtypes), side by side");
  cpu->add_option("--config", *cpu_config, "TOML config (default: the built-in default, cpu + default model)");
  cpu->add_option("--model", cpu_opt->config.model.path, "GGUF file or safetensors folder (overrides model.path)");
  cpu->add_option("--requests", cpu_opt->requests, "Requests per measurement")->capture_default_str()->check(CLI::Range(1u, 100'000u));
  cpu->add_option("--max-tokens", cpu_opt->max_tokens, "Tokens generated per request")->capture_default_str()->check(CLI::Range(1u, 100'000u));
  cpu->add_option("--concurrency", *concurrency, "Concurrent requests (closed loop), one measurement each")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1u, 4096u));
  cpu->add_flag("!--no-baseline", cpu_opt->sequential_baseline, "Skip the one-at-a-time baseline and the prefill");
  auto weights = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"stored", "f32"});
  cpu->add_option("--weights", *weights, "Weights paths measured: stored (as in the file), f32 (dequantized at load)")
      ->capture_default_str()->delimiter(',')->check(CLI::IsMember({"stored", "f32"}));
  auto kv_dtypes = std::make_shared<std::vector<std::string>>();
  cpu->add_option("--kv-dtype", *kv_dtypes, "KV cache dtypes measured, side by side: f16, f32 (default: cache.dtype)")
      ->delimiter(',')->check(CLI::IsMember({"f16", "f32"}));
  cpu->add_option("--prefill-tokens", cpu_opt->prefill_tokens, "Tokens of the one-prompt prefill measurement (0: none)")
      ->capture_default_str()->check(CLI::Range(0u, 100'000u));
  cpu->add_option("--tp", cpu_opt->config.engine.tensor_parallel_degree, "Tensor parallel degree")->check(CLI::Range(1, 64));
  cpu->add_option("--pp", cpu_opt->config.engine.pipeline_parallel_degree,
                  "Layer split: stages (engine.pipeline_parallel_degree)")->check(CLI::Range(1, 64));
  cpu->callback([cpu_opt, cpu_config, concurrency, weights, kv_dtypes, &exit_code] {
    const std::string model = cpu_opt->config.model.path;
    const auto tp = cpu_opt->config.engine.tensor_parallel_degree;
    const auto pp = cpu_opt->config.engine.pipeline_parallel_degree;
    auto cfg = load_config_or_report(*cpu_config);
    if (!cfg) {
      exit_code = 1;
      return;
    }
    auto opt = *cpu_opt;
    opt.config = *cfg;
    if (!model.empty()) opt.config.model.path = model;
    if (tp != config::EngineConfig{}.tensor_parallel_degree) opt.config.engine.tensor_parallel_degree = tp;
    if (pp != config::EngineConfig{}.pipeline_parallel_degree) opt.config.engine.pipeline_parallel_degree = pp;
    opt.concurrency = *concurrency;
    opt.weights.clear();
    for (const auto& w : *weights) opt.weights.push_back(w == "f32" ? config::CpuWeights::f32 : config::CpuWeights::stored);
    for (const auto& d : *kv_dtypes) opt.kv_dtypes.push_back(d == "f32" ? config::CacheDtype::f32 : config::CacheDtype::f16);
    try {
      exit_code = run_cpu(opt);
    } catch (const std::exception& e) {
      spdlog::error("bench cpu: {}", e.what());
      exit_code = 1;
    }
  });

  sched->callback([steps, threads, &exit_code] {
    try {
      exit_code = run_scheduler(*steps, *threads);
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace actorlm::tools
