#include "tools/bench/fidelity.hpp"

#include "actors/shard/cpu/cpu_backend.hpp"
#include "sim/model/catalogue.hpp"
#include "sim/simulation.hpp"
#include "tools/bench/client_bench.hpp"
#include "tools/bench/client_process.hpp"
#include "tools/bench/fidelity_floor.hpp"
#include "tools/bench/prompt_builder.hpp"
#include "tools/bench/timing.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/fmt/fmt.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace actorlm::bench {

namespace fs = std::filesystem;

namespace {

// A loopback port that was free a moment ago (the server binds it right after).
std::uint16_t free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) throw std::runtime_error("fidelity: socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(s);
    throw std::runtime_error("fidelity: no free loopback port");
  }
  ::close(s);
  return ntohs(a.sin_port);
}

// `actorlm serve --config FILE` in a child process, its output in a log file; stopped with
// SIGTERM (the daemon drains), then SIGKILL after 10 s.
class ServerProcess {
 public:
  ServerProcess(const std::string& binary, const std::string& config, const std::string& log) : log_(log) {
    std::vector<std::string> argv = {binary, "serve", "--config", config};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("fidelity: cannot start " + binary + ": " + std::strerror(rc));
  }
  ~ServerProcess() { stop(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) pid_ = -1;
    return pid_ > 0;
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  // The log's last lines, for an error message.
  std::string tail() const {
    std::ifstream in(log_);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::string out;
    for (std::size_t i = lines.size() > 15 ? lines.size() - 15 : 0; i < lines.size(); ++i) out += "\n  " + lines[i];
    return out;
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

config::Config case_config(const FidelityOptions& o, const FidelityCase& c) {
  config::Config cfg;
  cfg.engine.backend = config::Backend::cpu;
  cfg.engine.batching = c.regime;
  cfg.model.path = o.model_path;
  cfg.scheduler.max_num_seqs = o.max_num_seqs;
  cfg.cache.num_gpu_blocks_override = o.kv_blocks;
  cfg.model.max_model_len = std::min<std::int64_t>(cfg.model.max_model_len, std::int64_t{o.kv_blocks} * cfg.cache.block_size);
  return cfg;
}

FidelityMetrics metrics_of(const sim::Summary& s) {
  FidelityMetrics m;
  m.throughput = s.output_tokens_per_s;
  m.ttft_p50 = s.ttft_s.p50;
  m.ttft_p90 = s.ttft_s.p90;
  m.e2e_p50 = s.e2e_s.p50;
  m.e2e_p90 = s.e2e_s.p90;
  m.completed = s.completed;
  return m;
}

// The server's step counters so far (GET /metrics): steps, their wall time, the shards' part.
struct StepCounters {
  double steps = 0, step_s = 0, shard_s = 0;
};

StepCounters step_counters(const ServerUrl& url) {
  LoadClient client({url.endpoint});
  LoadRequest get;
  get.method = "GET";
  get.target = "/metrics";
  get.timeout = std::chrono::seconds(30);
  const auto r = client.run_all({get}).at(0);
  if (r.outcome != LoadOutcome::complete || r.status != 200)
    throw std::runtime_error("GET /metrics: " + (r.status ? "HTTP " + std::to_string(r.status) : r.error));
  const auto value = [&](const std::string& name) {
    const auto at = r.body.find("\n" + name + " ");
    if (at == std::string::npos) throw std::runtime_error("GET /metrics: no " + name);
    return std::stod(r.body.substr(at + name.size() + 2));
  };
  return {value("actorlm_engine_steps_total"), value("actorlm_engine_step_seconds_total"),
          value("actorlm_shard_step_seconds_total")};
}

// The step figures of a measured run from the counters before and after it.
void add_step_figures(FidelityMetrics& m, const StepCounters& before, const StepCounters& after, double duration_s) {
  const double steps = after.steps - before.steps;
  if (steps <= 0) throw std::runtime_error("GET /metrics: no step counted");
  const double step_s = after.step_s - before.step_s;
  m.steps = steps;
  m.step_s = step_s / steps;
  m.idle_s = std::max(0.0, duration_s - step_s);  // below 0 only by the two clocks' rounding
  m.serving_step_overhead = (step_s - (after.shard_s - before.shard_s)) / steps;
}

// The same figures of a simulated run from its step records.
void add_step_figures(FidelityMetrics& m, const sim::SimulationResult& r) {
  if (r.steps.empty()) return;
  double total = 0;
  for (const auto& s : r.steps) total += 1e-9 * static_cast<double>(s.end - s.start);
  m.steps = static_cast<double>(r.steps.size());
  m.step_s = total / m.steps;
  m.idle_s = std::max(0.0, r.summary.duration_s - total);  // below 0 only by rounding, as above
}

// Waits until the server lists its model (the engine is up), or throws with its log.
void wait_ready(ServerProcess& server, const ServerUrl& url) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!server.running()) throw std::runtime_error("fidelity: the server exited:" + server.tail());
    try {
      (void)first_listed_model(url, "");
      return;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  throw std::runtime_error("fidelity: the server did not come up in 120 s:" + server.tail());
}

}  // namespace

FidelityMetrics median_over_rounds(const std::vector<FidelityMetrics>& rounds) {
  if (rounds.empty()) throw std::invalid_argument("fidelity: a case with no measured round");
  const auto mid = [](const std::vector<FidelityMetrics>& rs, double FidelityMetrics::*m) {
    std::vector<double> v;
    for (const auto& r : rs) v.push_back(r.*m);
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  FidelityMetrics out = rounds.front();
  for (auto m : {&FidelityMetrics::throughput, &FidelityMetrics::ttft_p50, &FidelityMetrics::ttft_p90,
                 &FidelityMetrics::e2e_p50, &FidelityMetrics::e2e_p90, &FidelityMetrics::client_cpu_per_token})
    out.*m = mid(rounds, m);
  std::vector<FidelityMetrics> read;
  for (const auto& r : rounds)
    if (r.steps > 0) read.push_back(r);
  if (!read.empty())
    for (auto m : {&FidelityMetrics::steps, &FidelityMetrics::step_s, &FidelityMetrics::idle_s,
                   &FidelityMetrics::serving_step_overhead})
      out.*m = mid(read, m);
  return out;
}

double FidelityResult::error(double FidelityMetrics::*m) const {
  const double meas = measured.*m;
  return meas > 0 ? simulated.*m / meas - 1 : 0;
}

double FidelityResult::error_uncorrected(double FidelityMetrics::*m) const {
  const double meas = measured.*m;
  return meas > 0 ? simulated_uncorrected.*m / meas - 1 : 0;
}

namespace {

// `h` on a machine whose step times are `slowdown` times as long: every rate divided by it,
// every fixed time multiplied (efficiencies, memory and the model's shapes unchanged).
sim::Hardware slowed(sim::Hardware h, double slowdown) {
  for (double* rate : {&h.bandwidth, &h.flops, &h.link_bandwidth, &h.host_bandwidth, &h.small_gemm_flops,
                       &h.gemm_weight_rate, &h.large_batch_flops, &h.attention_flops, &h.prefill_attention_flops})
    *rate /= slowdown;
  for (double* time : {&h.link_latency, &h.kernel_launch, &h.step_overhead}) *time *= slowdown;
  return h;
}

}  // namespace

std::vector<FidelityCase> fidelity_cases(const FidelityOptions& o) {
  if (o.quick) {
    FidelityCase c{"short-in-long-out", config::Batching::paged, 2, {}};
    c.spec.requests = 4;
    c.spec.input = sim::FixedLength{16};
    c.spec.output = sim::FixedLength{8};
    c.spec.max_tokens = 32;  // the path of a request stopping early, on the real model
    c.spec.arrival = sim::ClosedLoopArrivals{2, 0};
    return {c};
  }
  struct Workload {
    const char* name;
    sim::LengthDistribution input, output;
    std::uint32_t max_tokens = 0;  // 0: each request asks for its length
  };
  // The mix asks for max_tokens 1,024 and stops early at its lengths, as real requests stop at
  // an EOS: the continuous regime reserves prompt + 1,024 tokens for each, so at a full batch it
  // holds fewer requests than the paged one (the default 1,024 blocks of 16 hold about 14).
  const std::vector<Workload> workloads = {
      {"short-in-long-out", sim::FixedLength{32}, sim::FixedLength{128}},
      {"long-in-short-out", sim::FixedLength{256}, sim::FixedLength{16}},
      {"lognormal-mix", sim::lognormal_from_mean_sd(160, 120, 16, 1024), sim::lognormal_from_mean_sd(80, 60, 8, 256),
       1024}};
  // The twins (a workload and load in both regimes) take turns to run first, one workload to the
  // next: in runs 41-44 the continuous twin, then always first, measured faster in 18 of 24 pairs,
  // and served A/B runs of the regimes alternating showed no regime effect (README, "Fidelity").
  std::vector<FidelityCase> out;
  for (std::size_t w = 0; w < workloads.size(); ++w)
    for (auto regime : w % 2 == 0 ? std::array{config::Batching::continuous, config::Batching::paged}
                                  : std::array{config::Batching::paged, config::Batching::continuous})
      for (std::uint32_t clients : {std::max(1u, o.max_num_seqs / 4), o.max_num_seqs}) {
        FidelityCase c{workloads[w].name, regime, clients, {}};
        c.spec.requests = clients * (clients == o.max_num_seqs ? 3 : 4);
        c.spec.input = workloads[w].input;
        c.spec.output = workloads[w].output;
        c.spec.max_tokens = workloads[w].max_tokens;
        c.spec.arrival = sim::ClosedLoopArrivals{clients, 0};
        out.push_back(c);
      }
  return out;
}

FidelityReport run_fidelity(const FidelityOptions& o) {
  const auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  FidelityReport report;
  const fs::path work = o.work_dir.empty() ? fs::temp_directory_path() / fmt::format("actorlm-fidelity-{}", ::getpid())
                                           : fs::path(o.work_dir);
  fs::create_directories(work);
  // A directory of our own making goes when the run ends; --out's stays.
  struct RemoveTemporary {
    fs::path dir;
    ~RemoveTemporary() {
      std::error_code ignored;
      if (!dir.empty()) fs::remove_all(dir, ignored);
    }
  } remove_temporary{o.work_dir.empty() ? work : fs::path()};

  // The machine's speed now, to compare with its speed at the end: the quick grid's total time.
  const auto probe = [&](const char* when) {
    CalibrateOptions po;
    po.config.model.path = o.model_path;
    po.tp = {1};
    po.grid = quick_calibration_grid();
    po.repeats = 2;
    po.passes = 1;
    const Calibration c = run_calibration(po);  // kept: a range-for over a temporary's member would dangle
    double total = 0;
    for (const auto& p : c.fits.at(0).points) total += p.measured_s;
    say(fmt::format("speed probe ({}): the quick grid's steps took {:.1f} ms", when, total * 1e3));
    return total;
  };

  // 1. The tokenizer for exact prompt lengths.
  config::Config model_cfg;
  model_cfg.model.path = o.model_path;
  const std::string model_path = shard::resolve_model_path(model_cfg);
  const auto tokenizer = load_tokenizer_file(model_path);
  // This binary as the server (as default_client_command() re-executes it as the load client):
  // /proc/self/exe still runs it if the file is rebuilt meanwhile.
  const std::string binary = "/proc/self/exe";

  // 2. Every case, measured (3.) then simulated (4.).
  const auto cases = fidelity_cases(o);
  // Measures case i once (a fresh server each time).
  const auto measure = [&](std::size_t i, std::uint32_t round) {
    const FidelityCase& c = cases[i];
    const std::string label = fmt::format("{} / {} / {} clients", c.workload, config::to_string(c.regime), c.clients);
    say(fmt::format("case {}/{}{}: {}", i + 1, cases.size(),
                    o.rounds > 1 ? fmt::format(" (round {}/{})", round + 1, o.rounds) : "", label));
    config::Config cfg = case_config(o, c);
    cfg.server.port = free_port();
    const fs::path cfg_file = work / fmt::format("serve-{}.toml", i + 1);
    std::ofstream(cfg_file) << config::to_toml(cfg);
    const auto requests = sim::generate(c.spec, o.seed);
    const auto closed = std::get<sim::ClosedLoopArrivals>(c.spec.arrival);
    ServerProcess server(binary, cfg_file.string(), (work / fmt::format("serve-{}.log", i + 1)).string());
    const ServerUrl url = parse_server_url(fmt::format("http://127.0.0.1:{}", cfg.server.port));
    wait_ready(server, url);
    ClientBenchOptions co;
    co.server = url;
    co.model = cfg.model.name;
    co.warn = [&](const std::string& line) { say("warning: " + line); };
    PromptBuilder prompts(tokenizer, o.seed + i);
    // One request first, unmeasured: the server's first step pays for warming up.
    (void)run_client_workload({sim::WorkloadRequest{0, 16, 4}}, sim::ClosedLoopArrivals{1, 0}, prompts, co);
    std::optional<StepCounters> before;
    try {
      before = step_counters(url);
    } catch (const std::exception& e) {
      say(fmt::format("warning: {}: the server's step counters not read: {}", label, e.what()));
    }
    const ClientRun run = run_client_workload(requests, closed, prompts, co);
    const sim::Summary summary = sim::summarize(run.requests, {});
    FidelityMetrics m = metrics_of(summary);
    if (summary.output_tokens > 0) m.client_cpu_per_token = run.cpu_s / static_cast<double>(summary.output_tokens);
    try {
      if (before) add_step_figures(m, *before, step_counters(url), summary.duration_s);
    } catch (const std::exception& e) {
      say(fmt::format("warning: {}: the server's step counters not read: {}", label, e.what()));
    }
    if (m.completed != requests.size()) {
      std::string kinds;
      for (const auto& [kind, n] : run.errors) kinds += fmt::format(" {} x{}", kind, n);
      throw std::runtime_error(fmt::format("fidelity: {}: {} of {} requests completed;{}{}", label, m.completed,
                                           requests.size(), kinds, server.tail()));
    }
    if (run.short_outputs + run.long_outputs > 0)  // the simulation's requests would not be these
      throw std::runtime_error(fmt::format("fidelity: {}: {} outputs shorter and {} longer than asked{}", label,
                                           run.short_outputs, run.long_outputs, server.tail()));
    say(fmt::format("  measured {:.1f} tok/s, p90 TTFT {:.3f} s, p90 E2E {:.3f} s; {}the client's CPU {:.1f} us per token",
                    m.throughput, m.ttft_p90, m.e2e_p90,
                    m.steps > 0 ? fmt::format("{:.0f} steps of {:.2f} ms (the engine's own {:.0f} us), {:.3f} s with "
                                              "no step running; ",
                                              m.steps, m.step_s * 1e3, m.serving_step_overhead * 1e6, m.idle_s)
                                : std::string(),
                    m.client_cpu_per_token * 1e6));
    return m;
  };
  // Rounds over all the cases (not one case after another), so that a slow spell of the
  // machine falls on one round of several cases; each figure is the median over rounds.
  // With drift correction a speed probe follows every measurement: a measurement's slowdown is
  // the mean of the probes on either side of it against the one after calibrating (the machine's
  // speed moves within minutes on a shared host; two probes at the ends of the run missed it).
  struct Measurement {
    std::size_t i;
    std::uint32_t round;
  };
  std::vector<Measurement> plan;
  for (std::uint32_t round = 0; round < std::max(1u, o.rounds); ++round)
    for (std::size_t i = 0; i < cases.size(); ++i) plan.push_back({i, round});
  std::vector<std::vector<FidelityMetrics>> rounds(cases.size());
  std::vector<std::vector<double>> slowdowns(cases.size());
  std::size_t done = 0;
  double probe_start = 0, probe_before = 0;
  const auto measure_until = [&](std::size_t end) {
    for (; done < end; ++done) {
      const auto [i, round] = plan[done];
      rounds[i].push_back(measure(i, round));
      if (!o.drift_correction) continue;
      const double probe_after = probe("after the case");
      slowdowns[i].push_back((probe_before + probe_after) / 2 / probe_start);
      probe_before = probe_after;
    }
  };

  // 3. The calibrated hardware. Its passes over the grid are spread over the measurements (the
  // served cases run between them): the medians over passes then describe the machine over the
  // time the cases took, where a calibration made before them all described only its start (the
  // machine's speed moves by 5-10 % within a run on a shared host). Not with drift correction,
  // whose probes are made against the calibration's own time.
  const bool interleaved = o.interleave && o.hardware_catalogue.empty() && !o.drift_correction;
  const fs::path catalogue_path = o.hardware_catalogue.empty() ? work / "hardware.toml" : fs::path(o.hardware_catalogue);
  if (o.hardware_catalogue.empty()) {
    CalibrateOptions co;
    co.config.model.path = o.model_path;
    co.tp = {1};
    co.fit_overlap = o.fit_overlap;
    if (o.quick) {
      co.grid = quick_calibration_grid();
      co.repeats = 2;
      co.passes = interleaved ? 2 : 1;
    }
    // With rounds, a pass between each two (rounds + 1 passes, 3 at least; --quick: 2 at least):
    // the calibration then samples the machine over the run as densely as the rounds do, and each
    // side's median describes the same span (run 51: five rounds between three passes simulated
    // ten of the twelve cases 2-12 % fast, the passes having caught quicker minutes than the rounds).
    if (interleaved) co.passes = std::max(co.passes, std::max(1u, o.rounds) + 1);
    co.progress = [&](const std::string& line) { say("calibrate: " + line); };
    if (interleaved)
      co.between_passes = [&](std::uint32_t pass) { measure_until(plan.size() * pass / (co.passes - 1)); };
    const Calibration cal = run_calibration(co);
    std::ofstream(catalogue_path) << hardware_catalogue_toml(cal);
    report.calibration.points = cal.fits.at(0).points;
    report.calibration.repeats = co.repeats;
    report.calibration.block_size = static_cast<std::uint32_t>(co.config.cache.block_size);
    report.calibration.read_bytes_per_s = cal.read_bytes_per_s;
    report.calibration.bytes_per_weight = cal.model.weight_bytes;
    report.hardware_key = cal.fits.at(0).hardware.key;
    if (interleaved) report.machine_drift = cal.fits.at(0).pass_drift;
    report.calibration_pass_spread = cal.fits.at(0).median_pass_spread;
    const double preset_bytes = sim::Catalogue::builtin().model(fidelity_model_preset).weight_bytes;
    if (std::abs(cal.model.weight_bytes / preset_bytes - 1) > 0.01)
      say(fmt::format("warning: the model holds {:.4g} bytes per weight, the simulated preset {} {:.4g}: "
                      "not the default model?", cal.model.weight_bytes, fidelity_model_preset, preset_bytes));
  }
  const sim::Catalogue catalogue = sim::Catalogue::load(catalogue_path.string(), "");
  if (report.hardware_key.empty())
    report.hardware_key = o.hardware_key.empty() ? catalogue.all_hardware().at(0).key : o.hardware_key;
  (void)catalogue.hardware(report.hardware_key);  // throws naming the known keys
  {
    std::ifstream in(catalogue_path);
    report.calibration_toml.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (!interleaved) {
    probe_start = probe_before = probe("start");
    measure_until(plan.size());
    report.machine_drift = (o.drift_correction ? probe_before : probe("end")) / probe_start - 1;
  }
  if (done != plan.size()) throw std::logic_error("fidelity: a case was not measured");  // the hook ran them all
  report.interleaved = interleaved;
  if (std::abs(report.machine_drift) > fidelity_goal_mean && !o.drift_correction)
    say(fmt::format("warning: the machine ran {:+.1f} % slower at the end than at the start: {}", 100 * report.machine_drift,
                    interleaved ? "the calibration's passes, spread over the run, took their median"
                                : "the calibration describes it only for part of the run"));
  // 4. Every case simulated, and the figures.
  for (std::size_t i = 0; i < cases.size(); ++i) {
    FidelityResult r;
    r.c = cases[i];
    r.rounds = rounds[i];
    r.measured = median_over_rounds(rounds[i]);
    r.slowdown = slowdowns[i].empty() ? 1.0 : median(slowdowns[i]);
    report.cases.push_back(std::move(r));
  }
  score_fidelity(o, catalogue, report);
  return report;
}

void score_fidelity(const FidelityOptions& o, const sim::Catalogue& catalogue, FidelityReport& report) {
  const auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  // The figures are sums and maxima over the cases: from zero.
  for (double* figure : {&report.mean_abs_error_throughput, &report.max_abs_error_throughput,
                         &report.mean_abs_error_p90_e2e, &report.max_abs_error_p90_e2e, &report.mean_abs_error_p90_ttft,
                         &report.max_abs_error_p90_ttft, &report.mean_abs_error_throughput_uncorrected,
                         &report.max_abs_error_throughput_uncorrected, &report.mean_abs_error_p90_e2e_uncorrected,
                         &report.max_abs_error_p90_e2e_uncorrected})
    *figure = 0;
  std::vector<double> all_slowdowns;
  for (std::size_t i = 0; i < report.cases.size(); ++i) {
    FidelityResult& r = report.cases[i];
    all_slowdowns.push_back(r.slowdown);
    const sim::Catalogue corrected = catalogue.with(slowed(catalogue.hardware(report.hardware_key), r.slowdown));
    config::Config sim_cfg = case_config(o, r.c);
    sim_cfg.engine.backend = config::Backend::sim;
    sim_cfg.sim.hardware = report.hardware_key;
    sim_cfg.model.preset = fidelity_model_preset;
    sim::SimulationOptions with_steps;  // the step records kept: they give the step figures
    const sim::SimulationResult simulated = sim::simulate(sim_cfg, corrected, r.c.spec, o.seed, with_steps);
    r.simulated = metrics_of(simulated.summary);
    add_step_figures(r.simulated, simulated);
    sim::SimulationOptions summary_only;
    summary_only.keep_records = false;
    r.simulated_uncorrected = metrics_of(sim::simulate(sim_cfg, catalogue, r.c.spec, o.seed, summary_only).summary);
    say(fmt::format("case {}: simulated {:.1f} tok/s, p90 TTFT {:.3f} s, p90 E2E {:.3f} s", i + 1,
                    r.simulated.throughput, r.simulated.ttft_p90, r.simulated.e2e_p90));
  }

  std::vector<double> overheads;
  for (const auto& r : report.cases)
    if (r.measured.serving_step_overhead >= 0) overheads.push_back(r.measured.serving_step_overhead);
  if (!overheads.empty()) {
    std::sort(overheads.begin(), overheads.end());
    report.serving_step_overhead = overheads[overheads.size() / 2];
  }
  report.calibrated_step_overhead = catalogue.hardware(report.hardware_key).step_overhead;
  if (!all_slowdowns.empty()) {
    const auto [lo, hi] = std::minmax_element(all_slowdowns.begin(), all_slowdowns.end());
    report.slowdown_min = *lo;
    report.slowdown_max = *hi;
  }
  report.drift_corrected = o.drift_correction;

  // The figures.
  const auto fold = [&](double FidelityMetrics::*m, double& mean, double& max) {
    for (const auto& r : report.cases) {
      const double e = std::abs(r.error(m));
      mean += e / double(report.cases.size());
      max = std::max(max, e);
    }
  };
  fold(&FidelityMetrics::throughput, report.mean_abs_error_throughput, report.max_abs_error_throughput);
  for (const auto& r : report.cases) {
    const double et = std::abs(r.error_uncorrected(&FidelityMetrics::throughput));
    const double ee = std::abs(r.error_uncorrected(&FidelityMetrics::e2e_p90));
    report.mean_abs_error_throughput_uncorrected += et / double(report.cases.size());
    report.mean_abs_error_p90_e2e_uncorrected += ee / double(report.cases.size());
    report.max_abs_error_throughput_uncorrected = std::max(report.max_abs_error_throughput_uncorrected, et);
    report.max_abs_error_p90_e2e_uncorrected = std::max(report.max_abs_error_p90_e2e_uncorrected, ee);
  }
  fold(&FidelityMetrics::e2e_p90, report.mean_abs_error_p90_e2e, report.max_abs_error_p90_e2e);
  fold(&FidelityMetrics::ttft_p90, report.mean_abs_error_p90_ttft, report.max_abs_error_p90_ttft);
  const TwinFloor throughput_floor = twin_floor(report.cases, &FidelityMetrics::throughput);
  const TwinFloor e2e_floor = twin_floor(report.cases, &FidelityMetrics::e2e_p90);
  report.twin_pairs = throughput_floor.pairs;
  report.floor_mean_abs_error_throughput = throughput_floor.mean;
  report.floor_max_abs_error_throughput = throughput_floor.max;
  report.floor_mean_abs_error_p90_e2e = e2e_floor.mean;
  report.floor_max_abs_error_p90_e2e = e2e_floor.max;
}

}  // namespace actorlm::bench
