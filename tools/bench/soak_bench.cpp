#include "tools/bench/soak_bench.hpp"

#include "actors/http/http_server.hpp"
#include "actors/serving/served_model.hpp"
#include "tools/bench/bench_server.hpp"
#include "tools/bench/client_process.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

namespace actorlm::bench {

namespace {

using nlohmann::json;

std::string describe(const SoakCounts& c) {
  return std::to_string(c.sent) + " sent, " + std::to_string(c.finished) + " finished, " + std::to_string(c.errored) +
         " errored, " + std::to_string(c.aborted) + " aborted mid-stream, " + std::to_string(c.disconnected) +
         " disconnected before the answer, " + std::to_string(c.lost) + " lost";
}

// Waits up to 30 s for the engine to let go of everything; fills the *_at_end fields.
void wait_for_drain(http::HttpServer& server, serving::ServedModel& model, SoakResult& r) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const auto kv = model.engine().kv_stats();
    r.blocks_in_use_at_end = std::uint64_t(kv.device_used) + kv.host_used;
    r.sequences_at_end = kv.num_sequences;
    r.in_flight_at_end = server.in_flight();
    r.drain_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.drained = r.blocks_in_use_at_end == 0 && r.sequences_at_end == 0 && r.in_flight_at_end == 0;
    if (r.drained || r.drain_seconds > 30) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

SoakResult run_soak_bench(const SoakOptions& opt) {
  auto say = [&](const std::string& s) { if (opt.progress) opt.progress(s); };
  raise_open_files_limit();
  BenchServer bench_server(opt.config, opt.caf_threads);
  auto& server = bench_server.http();
  auto& model = bench_server.model();
  const int port = bench_server.port();

  SoakResult r;
  r.served = model.description();
  ClientProcess clients(opt.client_command.empty() ? default_client_command() : opt.client_command);
  r.client_pid = clients.pid();
  r.rss_start_kib = resident_kib();
  say("serving " + r.served + " on port " + std::to_string(port) + "; load from a separate process (pid " +
      std::to_string(clients.pid()) + "), " + std::to_string(opt.concurrency) + " requests at a time for " +
      std::to_string(opt.seconds) + " s; resident memory " + std::to_string(r.rss_start_kib / 1024) + " MiB");
  clients.send({{"cmd", "soak"}, {"port", port}, {"model", opt.config.model.name}, {"seconds", opt.seconds},
                {"concurrency", opt.concurrency}, {"max_tokens", opt.max_tokens}, {"seed", opt.seed}});
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(opt.seconds)) +
                    std::chrono::minutes(5);  // the last requests' own timeout is 2 minutes
  for (;;) {
    const auto line = clients.receive(wait);
    if (line.contains("error")) throw std::runtime_error("client process: " + line["error"].get<std::string>());
    if (line.contains("progress")) {
      const auto& p = line["progress"];
      const auto kv = model.engine().kv_stats();
      const auto rss = resident_kib();
      if (r.rss_first_progress_kib == 0) r.rss_first_progress_kib = rss;
      say(std::to_string(int(p.at("seconds").get<double>())) + " s: " + describe(soak_counts_from(p)) + "; " +
          std::to_string(kv.device_used) + " KV blocks in use, " + std::to_string(server.in_flight()) +
          " requests in flight; resident memory " + std::to_string(rss / 1024) + " MiB");
      continue;
    }
    r.counts = soak_counts_from(line);
    r.seconds = line.at("seconds");
    break;
  }
  wait_for_drain(server, model, r);
  r.rss_end_kib = resident_kib();
  say("load over: " + describe(r.counts) + "; after " + std::to_string(r.drain_seconds) + " s " +
      std::to_string(r.blocks_in_use_at_end) + " KV blocks in use, " + std::to_string(r.in_flight_at_end) +
      " requests in flight; resident memory " + std::to_string(r.rss_start_kib / 1024) + " MiB at start, " +
      std::to_string(r.rss_end_kib / 1024) + " MiB at end");
  return r;
}

}  // namespace actorlm::bench
