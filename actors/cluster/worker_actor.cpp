#include "actors/cluster/worker_actor.hpp"

#include "actors/cluster/rendezvous_store.hpp"
#include "actors/serving/backend.hpp"

#include <caf/actor_system.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

namespace actorlm::cluster {

namespace {

struct WorkerState {
  std::shared_ptr<const WorkerOptions> options;
  Fingerprint fingerprint;
  std::string head;                          // the head being served; empty when none
  store_actor head_store;                    // monitored: its loss is the head's
  std::vector<shard::shard_actor> shards;    // the head's ranks hosted here
  static inline const char* name = "cluster_worker";
};

using self_ptr = worker_actor::stateful_pointer<WorkerState>;

// Stops the shards of the head being served and forgets it: their weights and KV cache are
// freed when the shard actors end.
// `why` empty: the worker itself ends (a signal, or the head's own worker with its head).
void drop_head(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.head.empty()) return;
  if (why.empty())
    spdlog::info("worker {}: stopping its {} shard(s)", st.options->name, st.shards.size());
  else
    spdlog::warn("worker {}: {}; stopping its {} shard(s) and waiting for a head", st.options->name, why,
                 st.shards.size());
  for (const auto& s : st.shards) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  if (st.head_store) self->demonitor(st.head_store.address());
  st.shards.clear();
  st.head.clear();
  st.head_store = nullptr;
}

WorkerHello on_hello(self_ptr self, const HeadHello& hello) {
  auto& st = self->state;
  const std::string me = hello.worker.empty() ? st.options->name : hello.worker;
  // The head being served says hello again: it is recovering from a lost rank elsewhere and has
  // let its ranks go (the loss of its old rendezvous store may not have arrived yet).
  if (!st.head.empty() && st.head == hello.head) drop_head(self, st.head + " reconnects");
  WorkerHello out;
  out.description = st.options->description;
  out.memory = st.options->memory;
  if (!st.head.empty()) {
    out.refusal = "worker " + me + " already serves " + st.head + "; " + hello.head + " was refused";
  } else if (auto diff = compare(hello.fingerprint, hello.head, st.fingerprint, me); !diff.empty()) {
    out.refusal = "worker " + me + " refuses " + hello.head + ": the configurations differ: " + diff;
  }
  if (out.refusal.empty()) spdlog::info("worker {}: hello from {}", me, hello.head);
  else spdlog::error("{}", out.refusal);
  return out;
}

caf::result<std::vector<shard::shard_actor>> on_host(self_ptr self, HostRanks& req) {
  auto& st = self->state;
  const auto& opt = *st.options;
  if (!st.head.empty())
    return caf::make_error(caf::sec::runtime_error, "worker " + opt.name + " already serves " + st.head);
  if (req.world != std::uint32_t(opt.config.engine.world_size()) || req.ranks.empty() || !req.store)
    return caf::make_error(caf::sec::runtime_error, "worker " + opt.name + ": a request for ranks [" +
                                                        ranks_text(req.ranks) + "] of " + std::to_string(req.world) +
                                                        " does not fit its configuration");
  const auto t0 = std::chrono::steady_clock::now();
  spdlog::info("worker {}: loading ranks [{}] of {}", opt.name, ranks_text(req.ranks), req.world);
  try {
    serving::RankHosting hosting;
    hosting.ranks = req.ranks;
    hosting.store = remote_store(self->system(), req.store);
    hosting.data_address = opt.data_address;
    auto backend = serving::load_backend(opt.config, hosting);
    std::vector<shard::shard_actor> shards;
    for (auto r : req.ranks) shards.push_back(backend.factory(self->system(), r, req.world));
    st.shards = shards;
    st.head = req.head.empty() ? "the head at node " + to_string(req.store.node()) : req.head;
    st.head_store = req.store;
    self->monitor(req.store);
    spdlog::info("worker {}: ranks [{}] ready in {:.1f} s", opt.name, ranks_text(req.ranks),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return shards;
  } catch (const std::exception& e) {
    spdlog::error("worker {}: hosting ranks [{}] failed: {}", opt.name, ranks_text(req.ranks), e.what());
    return caf::make_error(caf::sec::runtime_error, "worker " + opt.name + ": " + e.what());
  }
}

worker_actor::behavior_type worker_fn(self_ptr self, std::shared_ptr<const WorkerOptions> options) {
  self->state.options = options;
  self->state.fingerprint = fingerprint(options->config, options->identity);
  self->set_down_handler([self](caf::down_msg& dm) {
    if (dm.source == self->state.head_store.address())
      drop_head(self, self->state.head + " is gone (" + self->system().render(dm.reason) + ")");
  });
  self->set_exit_handler([self](caf::exit_msg& em) {
    drop_head(self, {});
    self->quit(em.reason);
  });
  return {
      [self](hello_atom, const HeadHello& hello) { return on_hello(self, hello); },
      [self](host_atom, HostRanks& req) { return on_host(self, req); },
  };
}

}  // namespace

worker_actor spawn_worker(caf::actor_system& sys, WorkerOptions options) {
  return sys.spawn<caf::detached>(worker_fn, std::make_shared<const WorkerOptions>(std::move(options)));
}

}  // namespace actorlm::cluster
