#include "tools/bench/cluster_bench.hpp"

#include "actors/config/config.hpp"
#include "actors/serving/served_model.hpp"
#include "tools/bench/timing.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with the byte counters (glibc's is older)
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace actorlm::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Bytes this process's TCP sockets have received and sent (acknowledged) so far, from the
// kernel's TCP_INFO of each socket: with the ranks on workers, every control-plane byte goes
// between the head and a worker, so the head's sockets see all of them.
std::uint64_t socket_bytes() {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/self/fd", ec)) {
    std::error_code link_ec;
    const auto target = fs::read_symlink(e.path(), link_ec);
    if (link_ec || target.string().rfind("socket:", 0) != 0) continue;
    const int fd = std::stoi(e.path().filename().string());
    struct tcp_info info {};
    socklen_t len = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;
    total += info.tcpi_bytes_received + info.tcpi_bytes_acked;
  }
  return total;
}

// `actorlm worker --listen 127.0.0.1:PORT --config FILE`, this binary again, once it listens;
// its log is kept (and shown when it fails to start).
class WorkerChild {
 public:
  WorkerChild(const std::string& config_file, int port) {
    std::vector<std::string> args = {"/proc/self/exe", "worker", "--listen", "127.0.0.1:" + std::to_string(port),
                                     "--config", config_file};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("bench cluster: pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("bench cluster: fork failed");
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = ::fdopen(fds[0], "r");
    const std::string marker = "worker listening on 127.0.0.1:";
    char line[4096];
    while (std::fgets(line, sizeof line, out_)) {
      log_ += line;
      const std::string l = line;
      if (auto at = l.find(marker); at != std::string::npos) {
        port_ = std::stoi(l.substr(at + marker.size()));
        break;
      }
    }
    if (port_ <= 0) {
      stop();
      throw std::runtime_error("bench cluster: a worker did not start:\n" + log_);
    }
    reader_ = std::thread([this] {
      char buf[4096];
      while (std::fgets(buf, sizeof buf, out_)) {
      }
    });
  }
  ~WorkerChild() { stop(); }
  WorkerChild(const WorkerChild&) = delete;
  WorkerChild& operator=(const WorkerChild&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  void stop() {
    kill();
    if (reader_.joinable()) reader_.join();
    if (out_) std::fclose(out_);
    out_ = nullptr;
  }
  pid_t pid_ = -1;
  int port_ = 0;
  FILE* out_ = nullptr;
  std::thread reader_;
  std::string log_;
};

// Counts the tokens and the finished samples (and those that finished with an error).
struct Tally {
  std::atomic<std::uint64_t> tokens{0}, finished{0}, errors{0};
};

// The sink shares its Tally: batches already queued when the sink is told to exit may still
// arrive after the block that made it has ended.
scheduler::token_sink::behavior_type tally_sink(scheduler::token_sink::pointer, std::shared_ptr<Tally> t) {
  return {[t](const scheduler::SinkBatch& b) {
    t->tokens.fetch_add(b.tokens.size(), std::memory_order_relaxed);
    for (const auto& f : b.finished) {
      t->finished.fetch_add(1, std::memory_order_relaxed);
      if (f.reason == scheduler::FinishReason::error) t->errors.fetch_add(1, std::memory_order_relaxed);
    }
  }};
}

template <class Pred>
void wait_for(Pred done, std::chrono::seconds limit, const std::string& what) {
  const auto deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > deadline) throw std::runtime_error("bench cluster: timed out waiting for " + what);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// A GPU whose every modelled step takes nanoseconds: what remains of a step is the runtime's.
constexpr const char* zero_cost_hardware = R"toml([runtime]
framework_overhead_mib = 0
comm_buffer_mib = 0

[gpu.zero]
name = "zero-cost GPU (bench cluster)"
memory_mib = 1000000
bandwidth_gbps = 1e12
fp16_tflops = 1e12
link = "none"
link_bandwidth_gbps = 1e12
link_latency_us = 0
host_bandwidth_gbps = 1e12
compute_efficiency = 1
memory_efficiency = 1
link_efficiency = 1
kernel_launch_us = 0
cuda_context_mib = 0
)toml";

std::string sim_config(const std::string& catalogue, const ClusterBenchOptions& o) {
  const std::uint32_t max_len = 8192;  // Llama-3-8B's context
  return "[engine]\nbackend = \"sim\"\ntensor_parallel_degree = 2\nbatching = \"paged\"\n"
         "[scheduler]\nmax_num_seqs = " + std::to_string(o.running) + "\nmax_num_batched_tokens = " +
         std::to_string(o.running * 16) + "\nchunked_prefill = true\n[model]\npreset = \"llama-3-8b\"\nmax_model_len = " +
         std::to_string(max_len) + "\n[cache]\nswap_space = 0.001\n[sim]\nclock = \"wall\"\nhardware = \"zero\"\n"
         "hardware_catalogue = \"" + catalogue + "\"\n[cluster]\nheartbeat_interval_s = 0.5\n";
}

// `degrees`: "tensor_parallel_degree = 3" or "pipeline_parallel_degree = 3".
std::string cpu_config(const std::string& degrees) {
  return "[engine]\n" + degrees + "\n[cache]\ncpu_kv_space = 0.25\nswap_space = 0.0625\n"
         "[model]\nmax_model_len = 512\n[cluster]\nheartbeat_interval_s = 0.5\n";
}

config::Config parse(const std::string& text, const std::vector<std::string>& workers) {
  auto r = config::parse_config(text, "bench cluster");
  if (!r.ok()) throw std::logic_error("bench cluster: its config is invalid: " + r.errors.front().to_string());
  r.config.cluster.workers = workers;
  return r.config;
}

struct Overhead {
  double median_us = 0, p90_us = 0, bytes_per_step = 0;
};

// `running` requests decoding; the gaps between the starts of consecutive full decode steps over
// `steps` iterations, and the bytes this process's sockets carried meanwhile per iteration.
Overhead decode_overhead(serving::ServedModel& model, const ClusterBenchOptions& o, scheduler::token_sink sink) {
  auto& eng = model.engine();
  for (std::uint32_t i = 0; i < o.running; ++i) {
    scheduler::RequestSpec spec;
    spec.id = i + 1;
    spec.prompt.assign(16, kv::TokenId(100 + i % 1000));
    spec.max_tokens = 8192 - 16;  // the measured steps, the failover's, and room (--steps <= 4000)
    spec.ignore_eos = true;
    if (eng.submit(std::move(spec), sink) != scheduler::SubmitStatus::accepted)
      throw std::runtime_error("bench cluster: a request was refused: " + eng.stats().failure);
  }
  wait_for([&] {
    const auto st = eng.stats();
    return st.counts.running == o.running && st.counts.waiting == 0;
  }, std::chrono::seconds(120), "every request to run");
  eng.take_step_records();
  const std::uint64_t bytes0 = socket_bytes();
  const std::uint64_t start = eng.stats().steps;
  wait_for([&] { return eng.stats().steps >= start + o.steps + 1; }, std::chrono::seconds(300), "the measured steps");
  const std::uint64_t bytes1 = socket_bytes();
  const std::uint64_t done = eng.stats().steps - start;
  const auto records = eng.take_step_records();
  std::vector<double> gaps;
  for (std::size_t i = 1; i < records.size(); ++i) {
    const auto& a = records[i - 1];
    const auto& b = records[i];
    if (a.decode_tokens == o.running && a.prefill_tokens == 0 && b.decode_tokens == o.running)
      gaps.push_back(double(b.start - a.start) / 1e3);
  }
  if (gaps.empty()) throw std::runtime_error("bench cluster: no full decode steps were recorded");
  Overhead out;
  auto sorted = gaps;
  std::sort(sorted.begin(), sorted.end());
  out.p90_us = sorted[sorted.size() * 9 / 10];
  out.median_us = median(std::move(gaps));
  // (Heartbeats count too: a few bytes every cluster.heartbeat_interval_s.)
  out.bytes_per_step = done > 0 ? double(bytes1 - bytes0) / double(done) : 0;
  return out;
}

// Tokens per second of `concurrency` requests of `tokens` tokens each, submitted together.
double tokens_per_s(serving::ServedModel& model, std::uint32_t concurrency, std::uint32_t tokens, Tally& tally,
                    scheduler::token_sink sink, std::uint64_t& next_id) {
  auto& eng = model.engine();
  const auto prompt = model.raw_prompt("The history of the printing press begins in the fifteenth century, when");
  const std::uint64_t finished0 = tally.finished, tokens0 = tally.tokens;
  const auto t0 = Clock::now();
  for (std::uint32_t i = 0; i < concurrency; ++i) {
    auto spec = model.request(next_id++, prompt, tokens);
    spec.ignore_eos = true;
    if (eng.submit(std::move(spec), sink) != scheduler::SubmitStatus::accepted)
      throw std::runtime_error("bench cluster: a cpu request was refused: " + eng.stats().failure);
  }
  wait_for([&] { return tally.finished >= finished0 + concurrency; }, std::chrono::seconds(600), "the cpu requests");
  const double secs = seconds_since(t0);
  if (tally.errors > 0) throw std::runtime_error("bench cluster: cpu requests failed: " + eng.stats().failure);
  return double(tally.tokens - tokens0) / secs;
}

}  // namespace

ClusterBenchResult run_cluster_bench(const ClusterBenchOptions& o) {
  const auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  const fs::path dir = fs::temp_directory_path() / ("actorlm-bench-cluster-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  const std::string catalogue = (dir / "zero_cost_hardware.toml").string();
  std::ofstream(catalogue) << zero_cost_hardware;
  const std::string sim_text = sim_config(catalogue, o);
  const std::string sim_file = (dir / "sim.toml").string();
  std::ofstream(sim_file) << sim_text;

  ClusterBenchResult res;
  caf::actor_system_config sys_cfg;
  serving::configure_actor_system(sys_cfg, parse(sim_text, {"127.0.0.1:1"}));
  caf::actor_system sys{sys_cfg};

  {
    say("control plane: " + std::to_string(o.running) + " sequences, zero-cost sim shards, TP 2 in this process");
    auto tally_ptr = std::make_shared<Tally>();
    auto sink = sys.spawn(tally_sink, tally_ptr);
    serving::ServedModel local(sys, parse(sim_text, {}));
    const auto ov = decode_overhead(local, o, sink);
    res.local_step_overhead_us = ov.median_us;
    res.local_step_p90_us = ov.p90_us;
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }
  {
    say("control plane: the same with one rank on each of 2 worker processes");
    auto w1 = std::make_unique<WorkerChild>(sim_file, 0);
    auto w2 = std::make_unique<WorkerChild>(sim_file, 0);
    const int w2_port = w2->port();
    auto tally_ptr = std::make_shared<Tally>();
    Tally& tally = *tally_ptr;
    auto sink = sys.spawn(tally_sink, tally_ptr);
    serving::ServedModel remote(sys, parse(sim_text, {w1->address(), w2->address()}));
    const auto ov = decode_overhead(remote, o, sink);
    res.remote_step_overhead_us = ov.median_us;
    res.remote_step_p90_us = ov.p90_us;
    res.step_bytes = ov.bytes_per_step;

    say("failover: SIGKILL of a worker with " + std::to_string(o.running) + " requests in flight");
    const auto t_kill = Clock::now();
    w2->kill();
    wait_for([&] { return tally.errors >= o.running; }, std::chrono::seconds(60), "the requests to fail");
    res.failover_seconds = seconds_since(t_kill);

    say("recovery: the worker restarted on its address, to the first request served");
    const auto t_restart = Clock::now();
    w2 = std::make_unique<WorkerChild>(sim_file, w2_port);
    wait_for([&] { return remote.engine().stats().healthy; }, std::chrono::seconds(60), "the engine to recover");
    const std::uint64_t before = tally.finished;
    scheduler::RequestSpec spec;
    spec.id = 1'000'000;
    spec.prompt.assign(16, 7);
    spec.max_tokens = 4;
    spec.ignore_eos = true;
    if (remote.engine().submit(std::move(spec), sink) != scheduler::SubmitStatus::accepted)
      throw std::runtime_error("bench cluster: the recovered engine refused a request");
    wait_for([&] { return tally.finished > before; }, std::chrono::seconds(60), "a request after recovery");
    if (tally.errors > o.running) throw std::runtime_error("bench cluster: the request after recovery failed");
    res.recovery_seconds = seconds_since(t_restart);
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }
  if (!o.cpu) return res;

  std::uint64_t next_id = 1;
  struct Split {
    const char* key;
    const char* degrees;
    const char* name;
  };
  for (const Split p : {Split{"tp3", "tensor_parallel_degree = 3", "TP 3"},
                        Split{"pp3", "pipeline_parallel_degree = 3", "a layer split over 3 stages"}}) {
    const std::string cpu_text = cpu_config(p.degrees);
    const std::string cpu_file = (dir / (std::string(p.key) + ".toml")).string();
    std::ofstream(cpu_file) << cpu_text;
    std::vector<double> one, two;
    {
      say(std::string("cpu: ") + p.name + " of the default model in this process");
      auto tally_ptr = std::make_shared<Tally>();
      Tally& tally = *tally_ptr;
      auto sink = sys.spawn(tally_sink, tally_ptr);
      serving::ServedModel local(sys, parse(cpu_text, {}));
      tokens_per_s(local, 1, 4, tally, sink, next_id);  // warm-up
      for (auto c : o.concurrency) one.push_back(tokens_per_s(local, c, o.cpu_tokens, tally, sink, next_id));
      caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    }
    {
      say(std::string("cpu: ") + p.name + " with rank 0 on one worker process and ranks 1, 2 on another");
      WorkerChild w1(cpu_file, 0), w2(cpu_file, 0);
      auto tally_ptr = std::make_shared<Tally>();
      Tally& tally = *tally_ptr;
      auto sink = sys.spawn(tally_sink, tally_ptr);
      serving::ServedModel remote(sys, parse(cpu_text, {w1.address(), w2.address()}));
      tokens_per_s(remote, 1, 4, tally, sink, next_id);
      for (auto c : o.concurrency) two.push_back(tokens_per_s(remote, c, o.cpu_tokens, tally, sink, next_id));
      caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    }
    for (std::size_t i = 0; i < o.concurrency.size(); ++i) res.cpu.push_back({p.key, o.concurrency[i], one[i], two[i]});
  }
  return res;
}

}  // namespace actorlm::bench
