#include "actors/cluster/supervisor.hpp"

#include "actors/cluster/head.hpp"
#include "actors/engine/engine.hpp"
#include "actors/serving/backend.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>

namespace actorlm::cluster {

namespace {

constexpr std::chrono::milliseconds poll_interval{100};
constexpr std::chrono::milliseconds first_backoff{250};
constexpr std::chrono::milliseconds max_backoff{2000};

// The worker processes in [cluster] workers: "head" (ranks in this process) is none.
std::uint32_t remote_workers(const config::Config& cfg) {
  const auto& w = cfg.cluster.workers;
  return static_cast<std::uint32_t>(w.size() - std::count(w.begin(), w.end(), config::head_worker));
}

// How long the head's own ranks may take to stop: one blocked in a collective with a lost peer
// stops when the collective gives up (the backend's stop bound), and 5 s more for the rest.
std::chrono::milliseconds local_stop_bound(const config::Config& cfg) {
  return serving::rank_stop_bound(cfg) + std::chrono::seconds(5);
}

void stop_shards(const std::vector<shard::shard_actor>& shards) {
  for (const auto& s : shards)
    if (s) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
}

struct LocalStop {
  std::size_t ranks = 0;    // the head's own ranks among the shards
  std::size_t running = 0;  // of them, still running when the wait ended
};

// Stops the shards and waits up to `bound` for those of this process (the head's own ranks) to be
// gone: until then they hold their weights, and the next ones would load theirs beside them.
// Gives up early when `stopping` says so (the daemon is shutting down).
LocalStop stop_and_await_local(caf::actor_system& sys, const std::vector<shard::shard_actor>& shards,
                               std::chrono::milliseconds bound, const std::function<bool()>& stopping) {
  caf::scoped_actor self{sys};
  LocalStop out;
  for (const auto& s : shards)
    if (s && s.node() == sys.node()) {
      self->monitor(s);  // before the exit: its down message cannot be missed
      ++out.ranks;
    }
  out.running = out.ranks;
  stop_shards(shards);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (out.running > 0 && !stopping()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    self->receive([&](const caf::down_msg&) { --out.running; },
                  caf::after(std::min(left, poll_interval)) >> [] {});  // then look at `stopping` again
  }
  return out;
}

}  // namespace

ClusterSupervisor::ClusterSupervisor(caf::actor_system& sys, const config::Config& cfg, std::string identity)
    : sys_(sys), cfg_(cfg), identity_(std::move(identity)), local_stop_bound_(local_stop_bound(cfg)) {
  current_ = std::make_unique<ClusterShards>(sys_, cfg_, identity_);
  workers_up_ = remote_workers(cfg_);
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
  return {remote_workers(cfg_), workers_up_.load(), failures_.load(),
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
                remote_workers(cfg_));
  const auto t0 = std::chrono::steady_clock::now();
  // The surviving workers drop their ranks when the old rendezvous store goes; the head's own
  // ranks are awaited, so that their weights are not held twice.
  const auto stopping = [this] {
    std::lock_guard lock(mu_);
    return stop_;
  };
  const LocalStop local = stop_and_await_local(sys_, current_->shards(), local_stop_bound_, stopping);
  if (stopping()) {
    spdlog::info("cluster: shutting down: no reconnecting");
    return false;
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (local.running > 0)
    spdlog::warn("cluster: {} of the head's {} rank(s) still running after {:.1f} s; the next ones load beside them, "
                 "holding their memory twice until they stop", local.running, local.ranks, waited);
  else if (local.ranks > 0)
    spdlog::info("cluster: the head's {} rank(s) stopped in {:.2f} s, their memory released", local.ranks, waited);
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
      workers_up_ = remote_workers(cfg_);
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
