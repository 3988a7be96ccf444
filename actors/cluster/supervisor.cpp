#include "actors/cluster/supervisor.hpp"

#include "actors/cluster/head.hpp"
#include "actors/engine/engine.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace actorlm::cluster {

namespace {

constexpr std::chrono::milliseconds poll_interval{100};

// The worker processes in [cluster] workers: "head" (ranks in this process) is none.
std::uint32_t remote_workers(const config::Config& cfg) {
  const auto& w = cfg.cluster.workers;
  return static_cast<std::uint32_t>(std::count_if(w.begin(), w.end(), [](const std::string& a) { return a != config::head_worker; }));
}
constexpr std::chrono::milliseconds first_backoff{250};
constexpr std::chrono::milliseconds max_backoff{2000};

void stop_shards(const std::vector<shard::shard_actor>& shards) {
  for (const auto& s : shards)
    if (s) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
}

// Stops the shards and waits up to `timeout` for those of this process (the head's own ranks)
// to be gone: until then they hold their weights, and the next ones would load theirs beside
// them. (A rank blocked in a collective with a lost peer stops when the collective times out.)
// Returns how many of them are still running.
std::size_t stop_and_await_local(caf::actor_system& sys, const std::vector<shard::shard_actor>& shards,
                                 std::chrono::milliseconds timeout) {
  caf::scoped_actor self{sys};
  std::size_t running = 0;
  for (const auto& s : shards)
    if (s && s.node() == sys.node()) {
      self->monitor(s);  // before the exit: its down message cannot be missed
      ++running;
    }
  stop_shards(shards);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (bool timed_out = false; running > 0 && !timed_out;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    self->receive([&](const caf::down_msg&) { --running; },
                  caf::after(std::max(left, std::chrono::milliseconds(0))) >> [&] { timed_out = true; });
  }
  return running;
}

}  // namespace

ClusterSupervisor::ClusterSupervisor(caf::actor_system& sys, const config::Config& cfg, std::string identity)
    : sys_(sys), cfg_(cfg), identity_(std::move(identity)) {
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
  const auto& old_shards = current_->shards();
  const std::size_t local = std::count_if(old_shards.begin(), old_shards.end(),
                                          [&](const auto& s) { return s && s.node() == sys_.node(); });
  const auto await = std::chrono::milliseconds(static_cast<std::int64_t>(1000 * cfg_.engine.step_timeout_s));
  if (const std::size_t left = stop_and_await_local(sys_, old_shards, await); left > 0)
    spdlog::warn("cluster: {} of the head's {} rank(s) did not stop within {:.0f} s (engine.step_timeout_s); the next "
                 "ones load beside them, holding their memory twice until they do", left, local,
                 cfg_.engine.step_timeout_s);
  else if (local > 0)
    spdlog::info("cluster: the head's {} rank(s) stopped in {:.2f} s, their memory released", local,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
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
