#pragma once
// The daemon's Prometheus metrics (GET /metrics). Request and step records drained from the
// scheduler feed the histograms; queue and KV gauges are read at scrape time. Names follow
// Prometheus conventions (actorlm_*, base units, _total for counters); README maps each one
// to its vLLM counterpart (vllm:*).

#include "actors/kv/kv_types.hpp"
#include "actors/scheduler/request.hpp"
#include "actors/scheduler/scheduler.hpp"
#include "actors/http/prometheus.hpp"

#include <map>
#include <mutex>
#include <string>

namespace actorlm::http {

class ServerMetrics {
 public:
  ServerMetrics();
  // Thread-safe.
  void record_requests(const std::vector<scheduler::RequestRecord>&);
  void record_steps(const std::vector<scheduler::StepRecord>&);
  void record_http_status(int status);
  std::string render(const scheduler::SchedulerCounts&, const kv::KvStats&, bool ready, bool healthy) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, itl_, e2e_, queue_, iteration_tokens_, prompt_hist_, generation_hist_;
  double prompt_tokens_ = 0, generation_tokens_ = 0;
  // Steps that ran a batch: how many, their wall time (the scheduler's start to end) and the part
  // the shard reported as its own execution; the difference is the engine's time per step.
  double steps_ = 0, step_seconds_ = 0, shard_seconds_ = 0, shard_host_seconds_ = 0;
  std::map<std::string, double> finished_;  // by finish reason: stop | length | abort | error
  std::map<int, double> http_status_;
};

}  // namespace actorlm::http
