#include "actors/scheduler/scheduler_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

namespace actorlm::scheduler {

namespace {

// What the engine is waiting for: nothing, the block manager's reservation, or the answering
// rank's step (SchedulerOptions::answering_rank; "rank 0" below).
enum class Phase : std::uint8_t { idle, reserving, executing };

struct SchedulerState {
  std::optional<Scheduler> policy;
  kv::block_manager_actor block_manager;
  bool block_manager_up = true;
  std::vector<shard::shard_actor> shards;
  std::vector<std::string> locations;   // [shards] or empty: where each rank runs
  std::size_t answering = 0;            // the rank whose answer is awaited
  std::unordered_map<RequestId, token_sink> sinks;
  // Direct-mapped memo in front of `sinks` (ids are mostly handed out in order): the per-token
  // lookup of deliver() skips the hash table. Map nodes never move; an erase clears its entry.
  std::vector<std::pair<RequestId, const token_sink*>> sink_memo =
      std::vector<std::pair<RequestId, const token_sink*>>(4096, {0, nullptr});
  Phase phase = Phase::idle;
  std::uint64_t phase_step = 0;   // the policy's step id of what is in flight
  Time deadline = 0;              // what is in flight fails if unanswered by then
  bool watchdog_pending = false;  // one sched_watchdog_atom is on its way
  bool tick_pending = false;      // a wake-up for the batching delay is scheduled
  kv::KvStats kv;
  std::uint64_t steps = 0;
  std::vector<RequestRecord> finished;  // kept for sched_requests_atom, bounded
  std::string failure;                  // why the engine is unhealthy; empty while healthy
  static inline const char* name = "scheduler";
};

using self_ptr = scheduler_actor::stateful_pointer<SchedulerState>;

Time now(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

std::string seconds_text(Time ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", double(ns) * 1e-9);
  return buf;
}

// How long rank 0's error for a step waits for a lost peer rank's down message (see the error
// handler in on_reserved).
constexpr std::chrono::milliseconds step_failure_grace{200};

// "shard rank 1", or with the rank on another machine "shard rank 1 on worker 10.0.0.2:7001".
std::string shard_label(self_ptr self, std::size_t rank) {
  const auto& where = self->state.locations;
  return "shard rank " + std::to_string(rank) + (rank < where.size() ? " on " + where[rank] : std::string());
}

// One message per sink per step, however many of its requests produced tokens. `error` goes
// with the batches when some of the finishes are FinishReason::error.
void deliver(self_ptr self, StepEvents ev, const std::string& error = {}) {
  auto& sinks = self->state.sinks;
  // Consecutive events often share a request (n > 1) or a sink (one client's requests, a
  // benchmark's or the simulator's one sink): the last ones found are tried first.
  RequestId last_id = 0;
  const token_sink* last_sink = nullptr;
  auto& memo = self->state.sink_memo;
  auto sink_of = [&](RequestId id) -> const token_sink* {
    if (last_sink != nullptr && id == last_id) return last_sink;
    auto& e = memo[id & (memo.size() - 1)];
    last_id = id;
    if (e.second != nullptr && e.first == id) return last_sink = e.second;
    auto it = sinks.find(id);
    last_sink = it == sinks.end() ? nullptr : &it->second;
    if (last_sink != nullptr) e = {id, last_sink};
    return last_sink;
  };
  // The common case: every event goes to one sink, which takes the step's vectors whole.
  const token_sink* only = nullptr;
  bool single = true;
  auto same_sink = [&](RequestId id) {
    const token_sink* s = sink_of(id);
    if (s == nullptr || (only != nullptr && *s != *only)) return false;
    only = s;
    return true;
  };
  for (const auto& t : ev.tokens)
    if (!(single = same_sink(t.request))) break;
  if (single)
    for (const auto& f : ev.finished)
      if (!(single = same_sink(f.request))) break;
  if (single && only != nullptr) {
    SinkBatch b;
    b.tokens = std::move(ev.tokens);
    b.finished = std::move(ev.finished);
    if (std::any_of(b.finished.begin(), b.finished.end(),
                    [](const FinishEvent& f) { return f.reason == FinishReason::error; }))
      b.error = error;
    self->send(*only, std::move(b));
  } else if (!ev.tokens.empty() || !ev.finished.empty()) {
    std::unordered_map<caf::abstract_actor*, std::pair<token_sink, SinkBatch>> out;
    caf::abstract_actor* last = nullptr;
    SinkBatch* last_batch = nullptr;
    auto batch_of = [&](RequestId id) -> SinkBatch* {
      const token_sink* sink = sink_of(id);
      if (sink == nullptr) return nullptr;
      auto* ptr = caf::actor_cast<caf::abstract_actor*>(*sink);
      if (ptr == last) return last_batch;
      auto& slot = out[ptr];
      if (!slot.first) slot.first = *sink;
      last = ptr;
      last_batch = &slot.second;
      return last_batch;
    };
    for (auto& t : ev.tokens)
      if (SinkBatch* b = batch_of(t.request)) b->tokens.push_back(std::move(t));
    for (const auto& f : ev.finished)
      if (SinkBatch* b = batch_of(f.request)) {
        b->finished.push_back(f);
        if (f.reason == FinishReason::error) b->error = error;
      }
    for (auto& [ptr, slot] : out) self->send(slot.first, std::move(slot.second));
  }
  auto& kept = self->state.finished;
  for (auto& rec : self->state.policy->take_finished_records()) {
    if (auto& e = memo[rec.id & (memo.size() - 1)]; e.first == rec.id) e = {0, nullptr};
    sinks.erase(rec.id);
    // Nobody may be reading the records (no metrics scrape): keep the newest ones only.
    if (kept.size() >= max_kept_records)
      kept.erase(kept.begin(), kept.begin() + records_dropped_when_full);
    kept.push_back(std::move(rec));
  }
}

void iterate(self_ptr self, StepEvents* finished_step = nullptr);

// Something was sent that must be answered by `now + step_timeout`. The watchdog already on its
// way fires no later than that (deadlines only grow), and re-arms itself then.
void begin_phase(self_ptr self, Phase phase, Time t) {
  auto& st = self->state;
  st.phase = phase;
  st.phase_step = st.policy->step_id();
  st.deadline = t + st.policy->options().step_timeout;
  if (st.watchdog_pending) return;
  st.watchdog_pending = true;
  self->delayed_send(self, std::chrono::nanoseconds(st.policy->options().step_timeout),
                     sched_watchdog_atom::value);
}

// The step in flight failed: its requests end with `why`; the engine goes on with the rest.
void fail_step(self_ptr self, const std::string& why) {
  auto& st = self->state;
  st.phase = Phase::idle;
  deliver(self, st.policy->fail_step(st.phase_step, now(self)), why);
  iterate(self);
}

// The engine lost a component: every request ends with `why`, and nothing more is served.
void fail_engine(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (!st.failure.empty()) return;  // the first cause is the one reported
  st.failure = why;
  st.phase = Phase::idle;
  deliver(self, st.policy->fail_all(now(self)), why);
  // Blocks go back when the block manager can take them (a reservation still in flight, if
  // any, keeps what it allocated: the engine serves nothing more anyway).
  if (auto frees = st.policy->take_pending_frees(); !frees.empty() && st.block_manager_up)
    self->request(st.block_manager, caf::infinite, kv::kv_abort_atom::value, std::move(frees))
        .then([](const std::vector<kv::SeqId>&) {}, [](caf::error&) {});
}

void finish_step(self_ptr self, const shard::StepResult& result) {
  auto& st = self->state;
  st.phase = Phase::idle;
  auto events = st.policy->on_executed(result, now(self));
  ++st.steps;
  iterate(self, &events);
}

// The block manager answered the reservation of the step in flight: send the step to the shards.
void on_reserved(self_ptr self, const kv::ReserveReply& reply) {
  auto& st = self->state;
  st.kv = reply.stats;
  auto step = st.policy->on_reserved(reply);
  if (step.seqs.empty() && step.copies.empty() && step.swap_out.empty() && step.swap_in.empty()) {
    finish_step(self, shard::StepResult{step.id, {}, {}, 0});  // only frees and forks
    return;
  }
  begin_phase(self, Phase::executing, now(self));
  for (std::size_t rank = 0; rank < st.shards.size(); ++rank)
    if (rank != st.answering) caf::anon_send(st.shards[rank], step);
  const std::uint64_t id = step.id;
  // No timeout here: the watchdog keeps the deadline (see the header).
  self->request(st.shards[st.answering], caf::infinite, std::move(step))
      .then(
          [self, id](const shard::StepResult& r) {
            auto& st = self->state;
            if (st.phase != Phase::executing || st.phase_step != id) return;  // failed already
            finish_step(self, r);
          },
          [self, id](caf::error& err) {
            auto& st = self->state;
            if (st.phase != Phase::executing || st.phase_step != id) return;
            std::string why = shard_label(self, st.answering) + " failed step " + std::to_string(id) + ": " +
                              self->system().render(err);
            if (st.shards.size() == 1) return fail_step(self, why);
            // With several ranks, rank 0's error is often a symptom: its all-reduce lost a peer
            // that has stopped. The peer's down message comes within milliseconds of it and fails
            // the engine naming the real cause; until the grace period is over nothing else runs.
            self->delayed_send(self, step_failure_grace, sched_step_failed_atom::value, id, std::move(why));
          });
}

// A step of at most this many tokens reaches its sinks before the next reservation (and any
// KV abort) is sent; a larger one after it (see iterate). Measured at 1, 16, 64 and 256
// streams only: 16 is where the two orders measured alike.
constexpr std::size_t small_step_tokens = 16;

// Starts the next iteration unless one is running, the engine is unhealthy, or there is
// nothing to do. `finished_step`, the events of the step that just ended, goes to the sinks
// after the plan (planning after delivering was worse at every size), and before or after the
// reservation's message by the step's size: each message wakes a thread, and the first sent is
// served first. A small step's tokens then skip the wait for the block manager's wake-up; a
// large one's dispatch would take the cores from the block manager's reservation instead
// (README, `bench serve`, for the figures).
void iterate(self_ptr self, StepEvents* finished_step) {
  auto& st = self->state;
  auto hand_over = [&] {
    if (finished_step) deliver(self, std::move(*std::exchange(finished_step, nullptr)));
  };
  if (st.phase != Phase::idle || !st.failure.empty()) return hand_over();
  const Time t = now(self);
  auto req = st.policy->plan(t);
  if (finished_step && finished_step->tokens.size() <= small_step_tokens) hand_over();
  if (!req) {
    // Nothing to run: return what aborts freed, and wake up when a batching delay ends.
    // (Nothing waits on the abort's answer, so a block manager that never gives it stalls
    // nothing; its loss is noticed by the monitor.)
    if (auto frees = st.policy->take_pending_frees(); !frees.empty())
      self->request(st.block_manager, caf::infinite, kv::kv_abort_atom::value, std::move(frees))
          .then([](const std::vector<kv::SeqId>&) {}, [](caf::error&) {});
    if (auto wake = st.policy->next_wakeup(); wake && !st.tick_pending) {
      st.tick_pending = true;
      const auto delay = std::max<Time>(0, *wake - t);
      self->delayed_send(self, std::chrono::nanoseconds(delay), sched_tick_atom::value);
    }
    return hand_over();
  }
  begin_phase(self, Phase::reserving, t);
  const std::uint64_t id = st.phase_step;
  self->request(st.block_manager, caf::infinite, std::move(*req))
      .then(
          [self, id](const kv::ReserveReply& reply) {
            auto& st = self->state;
            if (st.phase != Phase::reserving || st.phase_step != id) return;  // failed already
            on_reserved(self, reply);
          },
          [self, id](caf::error& err) {
            auto& st = self->state;
            if (st.phase != Phase::reserving || st.phase_step != id) return;
            // Its state and the policy's mirror may now differ: nothing more can be trusted.
            fail_engine(self, "the block manager failed the reservation for step " +
                                  std::to_string(id) + ": " + self->system().render(err));
          });
  hand_over();
}

void on_watchdog(self_ptr self) {
  auto& st = self->state;
  st.watchdog_pending = false;
  if (st.phase == Phase::idle) return;  // never re-armed while idle
  const Time t = now(self);
  if (t < st.deadline) {
    st.watchdog_pending = true;
    self->delayed_send(self, std::chrono::nanoseconds(st.deadline - t), sched_watchdog_atom::value);
    return;
  }
  const std::string limit = seconds_text(st.policy->options().step_timeout) + " (engine.step_timeout_s)";
  if (st.phase == Phase::executing)
    fail_step(self, shard_label(self, st.answering) + " did not answer step " + std::to_string(st.phase_step) + " within " + limit);
  else
    fail_engine(self, "the block manager did not answer the reservation for step " +
                          std::to_string(st.phase_step) + " within " + limit);
}

// Which engine component an address is, for the down handler; empty when none.
std::string component_name(self_ptr self, const caf::actor_addr& who) {
  auto& st = self->state;
  if (who == st.block_manager.address()) return "the block manager";
  for (std::size_t rank = 0; rank < st.shards.size(); ++rank)
    if (st.shards[rank] && who == st.shards[rank].address()) return shard_label(self, rank);
  return {};
}

void monitor_components(self_ptr self) {
  auto& st = self->state;
  self->monitor(st.block_manager);
  for (const auto& s : st.shards)
    if (s) self->monitor(s);  // null: an idle rank of the simulator, with no actor behind it
  self->set_down_handler([self](caf::down_msg& dm) {
    const std::string who = component_name(self, dm.source);
    if (who.empty()) return;
    if (dm.source == self->state.block_manager.address()) self->state.block_manager_up = false;
    fail_engine(self, who + " stopped: " + self->system().render(dm.reason));
  });
}

// The lost shards are replaced: the block manager forgets what they held, then the engine is
// healthy and serves again.
caf::result<bool> replace_shards(self_ptr self, std::vector<shard::shard_actor> shards,
                                 std::vector<std::string> locations) {
  auto& st = self->state;
  if (st.failure.empty() || !st.block_manager_up || shards.size() != st.shards.size() ||
      std::any_of(shards.begin(), shards.end(), [](const auto& s) { return !s; }))
    return false;
  auto rp = self->make_response_promise<bool>();
  self->request(st.block_manager, caf::infinite, kv::kv_reset_atom::value)
      .then(
          [self, rp, shards = std::move(shards), locations = std::move(locations)](const kv::KvStats& kv) mutable {
            auto& st = self->state;
            for (const auto& s : st.shards)
              if (s) self->demonitor(s.address());
            st.shards = std::move(shards);
            st.locations = std::move(locations);
            for (const auto& s : st.shards) self->monitor(s);
            st.kv = kv;
            st.failure.clear();
            st.phase = Phase::idle;
            rp.deliver(true);
            iterate(self);
          },
          [rp](caf::error&) mutable { rp.deliver(false); });
  return rp;
}

scheduler_actor::behavior_type scheduler_fn(self_ptr self, SchedulerOptions opt,
                                            kv::block_manager_actor bm,
                                            std::vector<shard::shard_actor> shards) {
  self->state.policy.emplace(opt);
  self->state.block_manager = std::move(bm);
  self->state.shards = std::move(shards);
  self->state.locations = opt.shard_locations;
  self->state.answering = opt.answering_rank;  // below shards.size(): spawn_scheduler checks
  monitor_components(self);
  return {
      [self](RequestSpec& spec, token_sink& sink) {
        if (!self->state.failure.empty()) return SubmitStatus::unavailable;
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
        const auto& st = self->state;
        return EngineStats{st.policy->counts(), st.kv, st.steps, st.failure.empty(), st.failure};
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
      [self](sched_watchdog_atom) { on_watchdog(self); },
      [self](sched_step_failed_atom, std::uint64_t id, const std::string& why) {
        auto& st = self->state;
        if (st.phase == Phase::executing && st.phase_step == id && st.failure.empty()) fail_step(self, why);
      },
      [self](sched_replace_atom, std::vector<shard::shard_actor>& shards,
             std::vector<std::string>& locations) -> caf::result<bool> {
        return replace_shards(self, std::move(shards), std::move(locations));
      },
  };
}

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const SchedulerOptions& opt,
                                kv::block_manager_actor block_manager,
                                std::vector<shard::shard_actor> shards) {
  if (!shards.empty() && opt.answering_rank >= shards.size())
    throw std::invalid_argument("scheduler: answering rank " + std::to_string(opt.answering_rank) + " but " +
                                std::to_string(shards.size()) + " shards");
  return sys.spawn(scheduler_fn, opt, std::move(block_manager), std::move(shards));
}

}  // namespace actorlm::scheduler
