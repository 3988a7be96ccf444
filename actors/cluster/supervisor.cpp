#include "actors/cluster/supervisor.hpp"

#include "actors/cluster/head.hpp"
#include "actors/engine/engine.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace actorlm::cluster {

namespace {

constexpr std::chrono::milliseconds poll_interval{100};
constexpr std::chrono::milliseconds first_backoff{250};
constexpr std::chrono::milliseconds max_backoff{2000};

void stop_shards(const std::vector<shard::shard_actor>& shards) {
  for (const auto& s : shards)
    if (s) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
}

}  // namespace

ClusterSupervisor::ClusterSupervisor(caf::actor_system& sys, const config::Config& cfg, std::string identity)
    : sys_(sys), cfg_(cfg), identity_(std::move(identity)) {
  current_ = std::make_unique<ClusterShards>(sys_, cfg_, identity_);
  workers_up_ = static_cast<std::uint32_t>(cfg_.cluster.workers.size());
}

ClusterSupervisor::~ClusterSupervisor() {
  stop_watching();
  if (current_) stop_shards(current_->shards());
}

void ClusterSupervisor::stop_watching() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

const std::vector<shard::shard_actor>& ClusterSupervisor::shards() const { return current_->shards(); }
const std::vector<std::string>& ClusterSupervisor::locations() const { return current_->locations(); }

ClusterStatus ClusterSupervisor::status() const {
  return {static_cast<std::uint32_t>(cfg_.cluster.workers.size()), workers_up_.load(), failures_.load(),
          recoveries_.load()};
}

void ClusterSupervisor::watch(engine::Engine& engine) {
  thread_ = std::thread([this, &engine] { run(engine); });
}

bool ClusterSupervisor::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_; });
}

void ClusterSupervisor::run(engine::Engine& engine) {
  while (pause(poll_interval)) {
    std::string failure;
    try {
      const auto st = engine.stats();
      if (st.healthy) continue;
      failure = st.failure;
    } catch (const std::exception& e) {
      spdlog::error("cluster: the scheduler is gone ({}); no more recovery", e.what());
      return;
    }
    if (!recover(engine, failure)) return;
  }
}

bool ClusterSupervisor::recover(engine::Engine& engine, const std::string& failure) {
  ++failures_;
  workers_up_ = 0;
  spdlog::error("cluster: the engine failed: {}; letting the ranks go and reconnecting to the {} worker(s)", failure,
                cfg_.cluster.workers.size());
  const auto t0 = std::chrono::steady_clock::now();
  // The surviving workers drop their ranks when the old rendezvous store goes.
  stop_shards(current_->shards());
  current_.reset();
  auto backoff = first_backoff;
  for (int attempt = 1;; ++attempt) {
    try {
      auto next = std::make_unique<ClusterShards>(sys_, cfg_, identity_);
      if (!engine.replace_shards(next->shards(), next->locations())) {
        spdlog::error("cluster: the engine did not take the new shards (its block manager is gone?); no more "
                      "recovery");
        stop_shards(next->shards());
        return false;
      }
      current_ = std::move(next);
      workers_up_ = static_cast<std::uint32_t>(cfg_.cluster.workers.size());
      ++recoveries_;
      spdlog::info("cluster: every worker is back; ranks re-created and the KV cache reset {:.1f} s after the failure "
                   "(attempt {}): serving again",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), attempt);
      return true;
    } catch (const std::exception& e) {
      // The first attempts each, then one in 30 (a minute at the longest backoff).
      if (attempt <= 5 || attempt % 30 == 0)
        spdlog::warn("cluster: reconnect attempt {} failed: {}; next in {:.2f} s", attempt, e.what(),
                     std::chrono::duration<double>(backoff).count());
    }
    if (!pause(backoff)) return false;
    backoff = std::min(backoff * 2, max_backoff);
  }
}

}  // namespace actorlm::cluster
