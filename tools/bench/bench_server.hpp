#pragma once
// The server of the HTTP benchmarks (bench serve, bench soak), in the benchmark's process: an
// actor system, the served model and the HTTP front end, serving on a thread of its own from
// construction until destruction. The benchmarks reach it over loopback like any client, and
// read the engine beside it (KV occupancy, the requests' token times).

#include "actors/config/config.hpp"
#include "actors/scheduler/request.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace actorlm::http { class HttpServer; }
namespace actorlm::serving { class ServedModel; }

namespace actorlm::bench {

using RecordObserver = std::function<void(const std::vector<scheduler::RequestRecord>&)>;

class BenchServer {
 public:
  // caf_threads: CAF scheduler threads (0: CAF's default). `observer` gets the records of the
  // finished requests (HttpServer::observe_records). Throws what ServedModel and bind() throw.
  BenchServer(const config::Config&, std::uint32_t caf_threads, RecordObserver observer = {});
  // Stops the server (requests in flight are aborted) and waits for its thread.
  ~BenchServer();
  BenchServer(const BenchServer&) = delete;
  BenchServer& operator=(const BenchServer&) = delete;

  int port() const;
  http::HttpServer& http();
  serving::ServedModel& model();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace actorlm::bench
