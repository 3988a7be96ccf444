#include "actors/scheduler/scheduler_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <optional>
#include <unordered_map>

namespace actorlm::scheduler {

namespace {

struct SchedulerState {
  std::optional<Scheduler> policy;
  kv::block_manager_actor block_manager;
  std::vector<shard::shard_actor> shards;
  std::unordered_map<RequestId, token_sink> sinks;
  bool busy = false;          // an iteration is between plan and on_executed
  bool tick_pending = false;  // a wake-up for the batching delay is scheduled
  kv::KvStats kv;
  std::uint64_t steps = 0;
  std::vector<RequestRecord> finished;  // kept for sched_requests_atom, bounded
  static inline const char* name = "scheduler";
};

using self_ptr = scheduler_actor::stateful_pointer<SchedulerState>;

Time now(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

// One message per sink per step, however many of its requests produced tokens.
void deliver(self_ptr self, const StepEvents& ev) {
  auto& sinks = self->state.sinks;
  std::unordered_map<caf::abstract_actor*, std::pair<token_sink, SinkBatch>> out;
  auto batch_of = [&](RequestId id) -> SinkBatch* {
    auto it = sinks.find(id);
    if (it == sinks.end()) return nullptr;
    auto& slot = out[caf::actor_cast<caf::abstract_actor*>(it->second)];
    if (!slot.first) slot.first = it->second;
    return &slot.second;
  };
  for (const auto& t : ev.tokens)
    if (SinkBatch* b = batch_of(t.request)) b->tokens.push_back(t);
  for (const auto& f : ev.finished)
    if (SinkBatch* b = batch_of(f.request)) b->finished.push_back(f);
  for (auto& [ptr, slot] : out) self->send(slot.first, std::move(slot.second));
  auto& kept = self->state.finished;
  for (auto& rec : self->state.policy->take_finished_records()) {
    sinks.erase(rec.id);
    // Nobody may be reading the records (no metrics scrape): keep the newest ones only.
    if (kept.size() >= 65536) kept.erase(kept.begin(), kept.begin() + 32768);
    kept.push_back(std::move(rec));
  }
}

void finish_step(self_ptr self, const shard::StepResult& result);

// Starts the next iteration unless one is running or there is nothing to do.
void iterate(self_ptr self) {
  auto& st = self->state;
  if (st.busy) return;
  auto req = st.policy->plan(now(self));
  if (!req) {
    // Nothing to run: return what aborts freed, and wake up when a batching delay ends.
    if (auto frees = st.policy->take_pending_frees(); !frees.empty())
      self->request(st.block_manager, caf::infinite, kv::kv_abort_atom::value, std::move(frees))
          .then([](const std::vector<kv::SeqId>&) {});
    if (auto wake = st.policy->next_wakeup(); wake && !st.tick_pending) {
      st.tick_pending = true;
      const auto delay = std::max<Time>(0, *wake - now(self));
      self->delayed_send(self, std::chrono::nanoseconds(delay), sched_tick_atom::value);
    }
    return;
  }
  st.busy = true;
  self->request(st.block_manager, caf::infinite, std::move(*req))
      .then(
          [self](const kv::ReserveReply& reply) {
            auto& st = self->state;
            st.kv = reply.stats;
            auto step = st.policy->on_reserved(reply);
            if (step.seqs.empty() && step.copies.empty() && step.swap_out.empty() &&
                step.swap_in.empty()) {
              finish_step(self, shard::StepResult{step.id, {}, 0});  // only frees and forks
              return;
            }
            for (std::size_t rank = 1; rank < st.shards.size(); ++rank)
              caf::anon_send(st.shards[rank], step);
            self->request(st.shards[0], caf::infinite, std::move(step))
                .then([self](const shard::StepResult& r) { finish_step(self, r); },
                      [self](caf::error& err) {
                        // A shard that cannot execute leaves the engine unable to serve.
                        self->quit(std::move(err));
                      });
          },
          [self](caf::error& err) { self->quit(std::move(err)); });
}

void finish_step(self_ptr self, const shard::StepResult& result) {
  auto& st = self->state;
  const auto events = st.policy->on_executed(result, now(self));
  st.busy = false;
  ++st.steps;
  deliver(self, events);
  iterate(self);
}

scheduler_actor::behavior_type scheduler_fn(self_ptr self, SchedulerOptions opt,
                                            kv::block_manager_actor bm,
                                            std::vector<shard::shard_actor> shards) {
  self->state.policy.emplace(opt);
  self->state.block_manager = std::move(bm);
  self->state.shards = std::move(shards);
  return {
      [self](RequestSpec& spec, token_sink& sink) {
        const RequestId id = spec.id;
        const auto status = self->state.policy->submit(std::move(spec), now(self));
        if (status == SubmitStatus::accepted) {
          self->state.sinks[id] = std::move(sink);
          iterate(self);
        }
        return status;
      },
      [self](sched_abort_atom, RequestId id) {
        const auto finished = self->state.policy->abort(id, now(self));
        if (finished.empty()) return false;
        deliver(self, StepEvents{{}, finished});
        iterate(self);  // returns the blocks now when idle, or with the next reservation
        return true;
      },
      [self](sched_stats_atom) {
        return EngineStats{self->state.policy->counts(), self->state.kv, self->state.steps};
      },
      [self](sched_records_atom) { return self->state.policy->take_step_records(); },
      [self](sched_requests_atom) {
        std::vector<RequestRecord> out;
        out.swap(self->state.finished);
        return out;
      },
      [self](sched_tick_atom) {
        self->state.tick_pending = false;
        iterate(self);
      },
  };
}

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const SchedulerOptions& opt,
                                kv::block_manager_actor block_manager,
                                std::vector<shard::shard_actor> shards) {
  return sys.spawn(scheduler_fn, opt, std::move(block_manager), std::move(shards));
}

}  // namespace actorlm::scheduler
