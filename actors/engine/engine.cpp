#include "actors/engine/engine.hpp"

#include "actors/kv/block_manager_actor.hpp"
#include "actors/scheduler/scheduler_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <chrono>
#include <stdexcept>
#include <string>

namespace actorlm::engine {

EngineActors spawn_engine(caf::actor_system& sys, const config::Config& cfg, KvCapacity kv,
                          const ShardFactory& make_shard, std::vector<std::string> shard_locations,
                          EngineOptions options) {
  if (kv.device_blocks == 0)
    throw std::invalid_argument("engine: the KV cache has no blocks (memory budget too small?)");
  if (!make_shard) throw std::invalid_argument("engine: no shard factory for backend '" +
                                               std::string(config::to_string(cfg.engine.backend)) + "'");
  auto opt = scheduler::SchedulerOptions::from(cfg, kv.device_blocks, kv.host_blocks);
  opt.vocab_size = kv.vocab_size;
  opt.answering_rank = kv.answering_rank;
  opt.shard_locations = std::move(shard_locations);
  opt.record_token_times = options.record_token_times;
  kv::BlockManagerOptions bm;
  bm.num_device_blocks = kv.device_blocks;
  bm.num_host_blocks = kv.host_blocks;
  bm.block_size = opt.block_size;
  bm.watermark = opt.watermark;
  bm.prefix_caching = cfg.cache.prefix_caching;
  bm.mode = opt.kv_mode();
  EngineActors a;
  a.block_manager = kv::spawn_block_manager(sys, bm);
  const auto world = static_cast<std::uint32_t>(cfg.engine.world_size());
  if (kv.answering_rank >= world)
    throw std::invalid_argument("engine: the backend's answering rank " + std::to_string(kv.answering_rank) +
                                " is not below the " + std::to_string(world) + " ranks");
  for (std::uint32_t rank = 0; rank < world; ++rank) a.shards.push_back(make_shard(sys, rank, world));
  a.scheduler = scheduler::spawn_scheduler(sys, opt, a.block_manager, a.shards);
  return a;
}

void stop_engine(const EngineActors& a) {
  // The scheduler first: it monitors the others and would take their exits for failures.
  caf::anon_send_exit(a.scheduler, caf::exit_reason::user_shutdown);
  for (const auto& s : a.shards) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(a.block_manager, caf::exit_reason::user_shutdown);
}

Engine::Engine(caf::actor_system& sys, const config::Config& cfg, KvCapacity kv,
               const ShardFactory& make_shard, std::vector<std::string> shard_locations)
    : sys_(sys), actors_(spawn_engine(sys, cfg, kv, make_shard, std::move(shard_locations))) {}

Engine::~Engine() { stop_engine(actors_); }

namespace {

// One blocking request to an engine actor on a scoped actor of its own, waiting at most
// `timeout`; an error reply (a stopped actor, the timeout) throws std::runtime_error.
template <class Result, class Handle, class... Args>
Result ask_within(caf::actor_system& sys, caf::duration timeout, const Handle& dest, Args&&... args) {
  Result out{};
  caf::scoped_actor self{sys};
  self->request(dest, timeout, std::forward<Args>(args)...)
      .receive([&](Result& r) { out = std::move(r); },
               [&](caf::error& e) { throw std::runtime_error(sys.render(e)); });
  return out;
}

// The scheduler always answers (it waits on nothing; if it stops, the request fails at once):
// no timeout, whose clock entry CAF 0.17 would keep until it expires.
template <class Result, class Handle, class... Args>
Result ask(caf::actor_system& sys, const Handle& dest, Args&&... args) {
  return ask_within<Result>(sys, caf::infinite, dest, std::forward<Args>(args)...);
}

// The block manager may hang (it is what a lost reservation deadline reports): bounded.
constexpr std::chrono::seconds block_manager_answer_within{5};

}  // namespace

scheduler::SubmitStatus Engine::submit(scheduler::RequestSpec spec, scheduler::token_sink sink) {
  return ask<scheduler::SubmitStatus>(sys_, actors_.scheduler, std::move(spec), std::move(sink));
}

bool Engine::abort(scheduler::RequestId id) {
  return ask<bool>(sys_, actors_.scheduler, scheduler::sched_abort_atom::value, id);
}

scheduler::EngineStats Engine::stats() {
  return ask<scheduler::EngineStats>(sys_, actors_.scheduler, scheduler::sched_stats_atom::value);
}

kv::KvStats Engine::kv_stats() {
  return ask_within<kv::KvStats>(sys_, caf::duration{block_manager_answer_within}, actors_.block_manager,
                                 kv::kv_stats_atom::value);
}

std::vector<scheduler::StepRecord> Engine::take_step_records() {
  return ask<std::vector<scheduler::StepRecord>>(sys_, actors_.scheduler, scheduler::sched_records_atom::value);
}

bool Engine::replace_shards(std::vector<shard::shard_actor> shards, std::vector<std::string> locations) {
  const bool ok = ask<bool>(sys_, actors_.scheduler, scheduler::sched_replace_atom::value, shards, std::move(locations));
  if (ok) actors_.shards = std::move(shards);
  return ok;
}

std::vector<scheduler::RequestRecord> Engine::take_request_records() {
  return ask<std::vector<scheduler::RequestRecord>>(sys_, actors_.scheduler, scheduler::sched_requests_atom::value);
}

}  // namespace actorlm::engine
