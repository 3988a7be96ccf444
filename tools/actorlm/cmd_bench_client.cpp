// `actorlm bench client URL [SCENARIO.toml]`: a scenario's workloads (or one from the flags) sent
// to any OpenAI-compatible server (client_bench.hpp); the report of `actorlm simulate` on stdout
// (the same table, and with --out the same CSV, JSON and SVG files), progress and warnings on
// stderr. Exit 0 ok (whatever the server answered), 1 bad input or no server, 2 usage.
#include "sim/report.hpp"
#include "sim/scenario.hpp"
#include "sim/scenario_run.hpp"
#include "tools/actorlm/commands.hpp"
#include "tools/bench/client_bench.hpp"
#include "tools/bench/prompt_builder.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <unistd.h>

namespace actorlm::tools {

namespace {

struct ClientCliOptions {
  std::string url, scenario, model, api_key, tokenizer, out, label = "measured", workload;
  std::optional<std::uint64_t> seed;
  std::uint32_t requests = 100, input = 128, output = 128, max_tokens = 0;
  std::optional<std::uint32_t> concurrency;
  std::optional<double> rate;
  bool no_ignore_eos = false, json = false, progress = false, keep_alive = false;
  double timeout_s = 600;
  std::uint32_t max_connections = 10'000;
};

// The scenario file, or one workload made of the flags.
std::optional<sim::Scenario> scenario_of(const ClientCliOptions& o) {
  if (o.scenario.empty()) {
    sim::Scenario s;
    sim::ScenarioWorkload w;
    w.name = "flags";
    w.spec.requests = o.requests;
    w.spec.input = sim::FixedLength{o.input};
    w.spec.output = sim::FixedLength{o.output};
    w.spec.max_tokens = o.max_tokens;
    if (o.rate) w.spec.arrival = sim::PoissonArrivals{*o.rate};
    else w.spec.arrival = sim::ClosedLoopArrivals{o.concurrency.value_or(8), 0};
    s.workloads.push_back(std::move(w));
    return s;
  }
  auto parsed = sim::load_scenario(o.scenario);
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) std::cerr << e.to_string() << "\n";
    return std::nullopt;
  }
  auto& s = parsed.scenario;
  if (!o.workload.empty()) {
    std::erase_if(s.workloads, [&](const auto& w) { return w.name != o.workload; });
    if (s.workloads.empty()) {
      std::cerr << o.scenario << ": no workload named \"" << o.workload << "\"\n";
      return std::nullopt;
    }
  }
  return std::move(s);
}

// "\rbench client: [#####.....] 50/100" on a terminal; else a line about every 5 s.
std::function<void(std::size_t, std::size_t)> progress_bar(const std::string& label, bool force) {
  const bool tty = isatty(STDERR_FILENO);
  if (!tty && !force) return {};
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [=](std::size_t done, std::size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (!tty && done != total && now - *last < std::chrono::seconds(5)) return;
    *last = now;
    const std::size_t width = 30, filled = total ? done * width / total : width;
    std::cerr << (tty ? "\r" : "") << "bench client: " << label << " [" << std::string(filled, '#')
              << std::string(width - filled, '.') << "] " << done << "/" << total
              << (tty && done != total ? "" : "\n") << std::flush;
  };
}

std::string client_line(const bench::ClientRun& r) {
  std::string s = "client: " + sim::format_fixed(r.cpu_s, 2) + " s CPU over " + sim::format_fixed(r.wall_s, 2) +
                  " s (" + sim::format_fixed(r.wall_s > 0 ? 100 * r.cpu_s / r.wall_s : 0, 1) + " % of one core), " +
                  std::to_string(r.peak_streams) + " streams open at most, read lag p50/p99 " +
                  sim::format_fixed(r.lag_us_p50, 0) + "/" + sim::format_fixed(r.lag_us_p99, 0) + " us; errors: ";
  if (r.errors.empty()) s += "none";
  bool first = true;
  for (const auto& [kind, n] : r.errors) s += (first ? "" : ", ") + kind + " " + std::to_string(n), first = false;
  if (r.short_outputs) s += "; " + std::to_string(r.short_outputs) + " outputs shorter than asked";
  if (r.long_outputs) s += "; " + std::to_string(r.long_outputs) + " outputs longer than asked (not stopped early)";
  if (r.retried) s += "; " + std::to_string(r.retried) + " sent again without a refused field";
  if (r.reused) s += "; " + std::to_string(r.reused) + " on kept-alive connections";
  return s + "\n";
}

nlohmann::json client_json(const bench::ClientRun& r) {
  return {{"cpu_s", r.cpu_s},          {"wall_s", r.wall_s},           {"peak_streams", r.peak_streams},
          {"lag_us_p50", r.lag_us_p50}, {"lag_us_p99", r.lag_us_p99}, {"errors", r.errors},
          {"short_outputs", r.short_outputs}, {"long_outputs", r.long_outputs}, {"retried", r.retried},
          {"reused_connections", r.reused}};
}

int run_bench_client(const ClientCliOptions& o) {
  try {
    auto scenario = scenario_of(o);
    if (!scenario) return 1;
    bench::ClientBenchOptions co;
    co.server = bench::parse_server_url(o.url);
    co.api_key = o.api_key;
    co.model = o.model.empty() ? bench::first_listed_model(co.server, o.api_key) : o.model;
    co.ignore_eos = !o.no_ignore_eos;
    co.max_connections = o.max_connections;
    co.keep_alive = o.keep_alive;
    co.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
    co.warn = [](const std::string& line) { std::cerr << "bench client: warning: " << line << "\n"; };
    const std::uint64_t seed = o.seed ? *o.seed : scenario->seed;
    std::unique_ptr<bench::PromptBuilder> prompts;
    if (o.tokenizer.empty()) {
      prompts = std::make_unique<bench::PromptBuilder>(seed);
      co.warn("no --tokenizer: prompt lengths are approximate (short words, about one token each)");
    } else {
      prompts = std::make_unique<bench::PromptBuilder>(bench::load_tokenizer_file(o.tokenizer), seed);
    }
    // Each workload and sweep point is one run, reported as one regime named by --label.
    sim::ScenarioOutcome outcome;
    outcome.regimes = {o.label};
    outcome.seed = seed;
    nlohmann::json runs = nlohmann::json::array();
    std::string client_lines;
    for (const auto& w : scenario->workloads) {
      sim::WorkloadOutcome wo{w.name, sim::to_string(w.spec), w.load_sweep, {}};
      for (std::size_t p = 0; p < std::max<std::size_t>(1, w.load_sweep.size()); ++p) {
        const auto spec = w.load_sweep.empty() ? w.spec : sim::at_rate(w.spec, w.load_sweep[p]);
        const auto* closed = std::get_if<sim::ClosedLoopArrivals>(&spec.arrival);
        const std::string label = w.name + (w.load_sweep.empty() ? "" : " @ " + sim::format_fixed(w.load_sweep[p], 3));
        co.progress = progress_bar(label, o.progress);
        auto run = bench::run_client_workload(sim::generate(spec, seed),
                                              closed ? std::optional(*closed) : std::nullopt, *prompts, co);
        sim::SimulationResult result;
        result.requests = std::move(run.requests);
        result.summary = sim::summarize(result.requests, {}, {scenario->slo});
        result.wall_seconds = run.wall_s;
        client_lines += label + ": " + client_line(run);
        runs.push_back({{"workload", w.name},
                        {"rate", w.load_sweep.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.load_sweep[p])},
                        {"summary", sim::summary_to_json(result.summary)},
                        {"client", client_json(run)}});
        wo.points.push_back({std::move(result)});
      }
      outcome.workloads.push_back(std::move(wo));
    }
    if (!scenario->name.empty()) std::cout << scenario->name << "\n\n";
    std::cout << "server " << o.url << " (model " << co.model << "), prompts "
              << (prompts->exact() ? "of exact length (" + o.tokenizer + ")" : "of approximate length") << "\n\n";
    std::cout << sim::scenario_table(outcome) << client_lines;
    if (!o.out.empty()) {
      const auto files = sim::write_reports(outcome, *scenario, o.out);
      std::cerr << "bench client: wrote " << files.size() << " files under " << o.out << "\n";
    }
    if (o.json)
      std::cout << nlohmann::json{{"bench", "client"}, {"url", o.url}, {"model", co.model},
                                  {"exact_prompts", prompts->exact()}, {"seed", seed}, {"runs", runs}}
                       .dump()
                << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench client: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

void add_bench_client_command(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<ClientCliOptions>();
  auto* cmd = bench.add_subcommand(
      "client",
      "Load generator for any OpenAI-compatible server (actorlm, vLLM, llama.cpp, TGI): a scenario's "
      "[[workloads]] (or --requests/--input/--output with --concurrency or --rate) as streamed "
      "/v1/completions with ignore_eos and max_tokens = min_tokens = the output length (a workload's "
      "max_tokens: that, with the request stopping early at its length on a stop token); per request "
      "TTFT, TPOT, ITL, E2E from the kernel's receive times; the report of `actorlm simulate`. "
      "Prompts of exact token length with --tokenizer (random one-token words, re-encoded and "
      "adjusted until the count is exact, a BOS counted when the tokenizer adds one)");
  cmd->add_option("url", o->url, "http://HOST:PORT[/v1] of the server")->required();
  cmd->add_option("scenario", o->scenario, "Scenario TOML whose [[workloads]], [slo] and seed are used");
  cmd->add_option("--workload", o->workload, "Only this workload of the scenario");
  cmd->add_option("--model", o->model, "The request's model field (default: the first of GET /v1/models)");
  cmd->add_option("--api-key", o->api_key, "Sent as Authorization: Bearer KEY");
  cmd->add_option("--tokenizer", o->tokenizer, "The served model's tokenizer (.gguf or tokenizer.json)");
  cmd->add_flag("--no-ignore-eos", o->no_ignore_eos,
                "Send neither ignore_eos nor min_tokens (nor a capped request's early stop: it asks for its "
                "max_tokens and ends where the model stops)");
  cmd->add_flag("--keep-alive", o->keep_alive,
                "Reuse connections (HTTP/1.1 keep-alive) as pooled clients do; default: a new connection per "
                "request, whose connect is then part of its TTFT");
  cmd->add_option("--requests", o->requests, "Without a scenario: requests")->capture_default_str()
      ->check(CLI::Range(1u, 10'000'000u));
  cmd->add_option("--input", o->input, "Without a scenario: prompt tokens")->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--output", o->output, "Without a scenario: output tokens")->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--max-tokens", o->max_tokens,
                  "Without a scenario: each request's max_tokens, above --output: it stops early at --output "
                  "(min_tokens, stop_token_ids and a logit_bias), as at an EOS (a workload's key: max_tokens)")
      ->check(CLI::Range(1u, 1u << 20));
  auto* conc = cmd->add_option("--concurrency", o->concurrency, "Without a scenario: closed loop (default 8)")
                   ->check(CLI::Range(1u, 1'000'000u));
  cmd->add_option("--rate", o->rate, "Without a scenario: Poisson arrivals, req/s")
      ->check(CLI::PositiveNumber)->excludes(conc);
  cmd->add_option("--seed", o->seed, "Workload and prompt seed (default: the scenario's)");
  cmd->add_option("--label", o->label, "The report's regime column")->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Seconds per request")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections", o->max_connections, "Open-loop exchanges at once")
      ->capture_default_str()->check(CLI::Range(1u, 1'000'000u));
  cmd->add_option("--out", o->out, "Directory for the CSV, JSON and SVG reports (as simulate --out)");
  cmd->add_flag("--json", o->json, "End stdout with one JSON line: every run's summary and client figures");
  cmd->add_flag("--progress", o->progress, "Progress on stderr even when it is not a terminal (a line every 5 s)");
  cmd->callback([o, &exit_code] { exit_code = run_bench_client(*o); });
}

}  // namespace actorlm::tools
