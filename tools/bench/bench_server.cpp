#include "tools/bench/bench_server.hpp"

#include "actors/http/http_server.hpp"
#include "actors/serving/served_model.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <thread>

namespace actorlm::bench {

namespace {

caf::actor_system_config& configured(caf::actor_system_config& cfg, std::uint32_t caf_threads) {
  serving::configure_actor_system(cfg);
  if (caf_threads > 0) cfg.set("scheduler.max-threads", std::size_t{caf_threads});
  return cfg;
}

}  // namespace

struct BenchServer::Impl {
  caf::actor_system_config sys_cfg;  // outlives the system, which refers to it
  caf::actor_system sys;
  serving::ServedModel model;
  http::HttpServer server;
  int port = 0;
  std::thread serving;

  Impl(const config::Config& cfg, std::uint32_t caf_threads, RecordObserver observer)
      : sys(configured(sys_cfg, caf_threads)), model(sys, cfg), server(sys, model, cfg) {
    if (observer) server.observe_records(std::move(observer));
    port = server.bind();
    serving = std::thread([this] { server.serve(); });
  }
  ~Impl() {
    server.stop();
    serving.join();
  }
};

BenchServer::BenchServer(const config::Config& cfg, std::uint32_t caf_threads, RecordObserver observer)
    : impl_(std::make_unique<Impl>(cfg, caf_threads, std::move(observer))) {}
BenchServer::~BenchServer() = default;
int BenchServer::port() const { return impl_->port; }
http::HttpServer& BenchServer::http() { return impl_->server; }
serving::ServedModel& BenchServer::model() { return impl_->model; }

}  // namespace actorlm::bench
