#include "actors/http/server_metrics.hpp"

namespace actorlm::http {

namespace {
// Bucket bounds (s) as vLLM uses for latencies, so dashboards' quantiles line up.
std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> token_buckets() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}
double seconds(scheduler::Time ns) { return double(ns) * 1e-9; }
const char* reason_name(scheduler::FinishReason r) {
  switch (r) {
    case scheduler::FinishReason::stop: return "stop";
    case scheduler::FinishReason::length: return "length";
    case scheduler::FinishReason::abort: return "abort";
    case scheduler::FinishReason::error: return "error";
  }
  return "unknown";
}
}  // namespace

ServerMetrics::ServerMetrics()
    : ttft_(latency_buckets()), itl_(latency_buckets()), e2e_(latency_buckets()), queue_(latency_buckets()),
      iteration_tokens_(token_buckets()), prompt_hist_(token_buckets()), generation_hist_(token_buckets()) {}

void ServerMetrics::record_requests(const std::vector<scheduler::RequestRecord>& records) {
  std::lock_guard lock(mu_);
  for (const auto& r : records) {
    std::uint64_t out = 0;
    for (auto n : r.output_tokens) out += n;
    prompt_tokens_ += r.prompt_tokens;
    generation_tokens_ += double(out);
    prompt_hist_.observe(r.prompt_tokens);
    generation_hist_.observe(double(out));
    for (auto reason : r.reasons) finished_[reason_name(reason)] += 1;
    if (r.first_scheduled >= 0) queue_.observe(seconds(r.first_scheduled - r.arrival));
    if (r.first_token >= 0) ttft_.observe(seconds(r.first_token - r.arrival));
    for (std::size_t i = 1; i < r.token_times.size(); ++i) itl_.observe(seconds(r.token_times[i] - r.token_times[i - 1]));
    if (r.finished >= 0) e2e_.observe(seconds(r.finished - r.arrival));
  }
}

void ServerMetrics::record_steps(const std::vector<scheduler::StepRecord>& steps) {
  std::lock_guard lock(mu_);
  for (const auto& s : steps) {
    iteration_tokens_.observe(double(s.prefill_tokens + s.decode_tokens));
    if (s.batch_size == 0) continue;
    steps_ += 1;
    step_seconds_ += seconds(s.end - s.start);
    shard_seconds_ += seconds(s.shard_ns);
    shard_host_seconds_ += seconds(s.shard_host_ns);
  }
}

void ServerMetrics::record_http_status(int status) {
  std::lock_guard lock(mu_);
  http_status_[status] += 1;
}

std::string ServerMetrics::render(const scheduler::SchedulerCounts& c, const kv::KvStats& kv, bool ready,
                                  bool healthy) const {
  std::lock_guard lock(mu_);
  std::string out;
  render_gauge(out, "actorlm_ready", "1 when the model is loaded, the engine is healthy and the server is not draining",
               ready ? 1 : 0);
  render_gauge(out, "actorlm_engine_healthy",
               "1 while every shard and the block manager run; 0 for good once one is lost (the process then exits)",
               healthy ? 1 : 0);
  render_gauge(out, "actorlm_num_requests_running", "Requests in the running batch", c.running);
  render_gauge(out, "actorlm_num_requests_waiting", "Requests waiting to be scheduled", c.waiting);
  render_gauge(out, "actorlm_num_requests_swapped", "Requests whose KV blocks are swapped out to host memory", c.swapped);
  const double usage = kv.device_total ? double(kv.device_used) / double(kv.device_total) : 0.0;
  render_gauge(out, "actorlm_kv_cache_usage_ratio", "Share of device KV blocks held by sequences (0 to 1)", usage);
  render_gauge(out, "actorlm_kv_cache_used_blocks", "Device KV blocks held by sequences", kv.device_used);
  render_gauge(out, "actorlm_kv_cache_total_blocks", "Device KV blocks in the cache", kv.device_total);
  render_counter(out, "actorlm_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache",
                 double(kv.prefix_queried_tokens));
  render_counter(out, "actorlm_prefix_cache_hits_total", "Prompt tokens served from the prefix cache",
                 double(kv.prefix_hit_tokens));
  render_counter(out, "actorlm_num_preemptions_total", "Requests preempted (recomputed or swapped out)",
                 double(c.preemptions));
  render_counter(out, "actorlm_engine_steps_total", "Engine steps that ran a batch", steps_);
  render_counter(out, "actorlm_engine_step_seconds_total",
                 "Wall time of those steps, from the scheduler's start of a step to its end", step_seconds_);
  render_counter(out, "actorlm_shard_step_seconds_total",
                 "The part of it the shards reported as their execution (the rest is the engine's own)",
                 shard_seconds_);
  render_counter(out, "actorlm_shard_host_seconds_total",
                 "Of the shards' part, the time rank 0 worked on the host rather than waited for its device "
                 "(cpu: all of it; sim: none); the step's host-side share is (step - shard + shard host) / step",
                 shard_host_seconds_);
  render_counter(out, "actorlm_prompt_tokens_total", "Prompt tokens of finished requests", prompt_tokens_);
  render_counter(out, "actorlm_generation_tokens_total", "Generated tokens of finished requests", generation_tokens_);
  out.append("# HELP actorlm_request_success_total Finished samples by finish reason\n"
             "# TYPE actorlm_request_success_total counter\n");
  for (const char* r : {"stop", "length", "abort", "error"}) {
    const auto it = finished_.find(r);
    out.append("actorlm_request_success_total{finished_reason=\"").append(r).append("\"} ")
        .append(prom_number(it == finished_.end() ? 0.0 : it->second)).append("\n");
  }
  out.append("# HELP actorlm_http_responses_total HTTP responses of the API endpoints by status code\n"
             "# TYPE actorlm_http_responses_total counter\n");
  for (const auto& [status, n] : http_status_)
    out.append("actorlm_http_responses_total{code=\"").append(std::to_string(status)).append("\"} ")
        .append(prom_number(n)).append("\n");
  ttft_.render(out, "actorlm_time_to_first_token_seconds", "Time from arrival to the first generated token");
  itl_.render(out, "actorlm_inter_token_latency_seconds", "Time between consecutive tokens of a request");
  e2e_.render(out, "actorlm_e2e_request_latency_seconds", "Time from arrival to the last token");
  queue_.render(out, "actorlm_request_queue_time_seconds", "Time from arrival to first being scheduled");
  iteration_tokens_.render(out, "actorlm_iteration_tokens_total", "Tokens (prefill and decode) per engine step");
  prompt_hist_.render(out, "actorlm_request_prompt_tokens", "Prompt tokens per finished request");
  generation_hist_.render(out, "actorlm_request_generation_tokens", "Generated tokens per finished request");
  return out;
}

}  // namespace actorlm::http
