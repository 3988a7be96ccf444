#include "actors/http/engine_bridge.hpp"

#include "actors/engine/engine.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_companion.hpp>
#include <caf/actor_system.hpp>
#include <caf/mixin/requester.hpp>
#include <caf/scoped_execution_unit.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>

#include <algorithm>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace actorlm::http {
namespace {

constexpr const char* link_lost = "the HTTP server's link to the engine ended";

// CAF 0.17's actor_companion cannot send requests; this one can (request(...).then(...)).
class SinkCompanion : public caf::extend<caf::actor_companion, SinkCompanion>::with<caf::mixin::requester> {
 public:
  using extended_base::extended_base;
};

}  // namespace

// The sink is a CAF actor companion: a real actor (it has an address, the scheduler sends it
// typed SinkBatch messages, it monitors the scheduler and sends requests), whose enqueue runs
// in the sender's thread and posts the message to the I/O thread, which then runs the actor's
// behaviour. So a step's tokens cost one wake (the I/O thread's), not two (a CAF worker for an
// event-based sink actor, then the I/O thread): that hop took a median of 97 µs at 256 streams.
// `io` and `bridge` are cleared by the bridge's destructor (and detach): the companion then
// posts nothing more, and handlers already posted do nothing.
struct EngineBridge::Core {
  std::mutex mu;
  boost::asio::io_context* io = nullptr;
  EngineBridge* bridge = nullptr;  // read on the I/O thread only
  std::weak_ptr<Core> holder;      // this Core, for the posted handlers to keep it alive
  scheduler::scheduler_actor scheduler;
  caf::scoped_execution_unit unit;  // the companion's execution context (outlives `actor`)
  SinkCompanion* self = nullptr;    // owned by `actor`
  caf::strong_actor_ptr actor;

  std::exception_ptr escaped;  // what a handler threw, rethrown after its activation
  bool lost = false;           // the companion ended on its own (I/O thread)
  // Submissions the scheduler has not answered in full, by key (I/O thread): when the companion
  // ends, CAF drops their answers' handlers, and these answer them instead.
  std::uint64_t next_submit = 0;
  std::unordered_map<std::uint64_t, std::function<void(const std::string&)>> open_submits;

  // Any thread (the companion's enqueue): runs the message on the I/O thread. What a handler
  // throws leaves through the event loop (which logs it and goes on), as any handler's would,
  // instead of ending the actor (CAF's way) and with it every stream of the thread.
  void post(caf::mailbox_element_ptr m) {
    std::lock_guard lock(mu);
    if (!io) return;
    boost::asio::post(*io, [this, keep = holder.lock(), m = std::move(m)]() mutable {
      if (!bridge) return;
      self->activate(&unit, *m);
      if (auto e = std::exchange(escaped, nullptr)) std::rethrow_exception(e);
    });
  }
  // Runs a handler's body (I/O thread, inside an activation).
  template <class F>
  void guard(F&& f) {
    try {
      f();
    } catch (...) {
      escaped = std::current_exception();
    }
  }
};

EngineBridge::EngineBridge(caf::actor_system& sys, engine::Engine& engine, boost::asio::io_context& io)
    : core_(std::make_shared<Core>()) {
  core_->holder = core_;
  core_->io = &io;
  core_->bridge = this;
  core_->scheduler = engine.actors().scheduler;
  core_->unit.system_ptr(&sys);
  core_->actor = caf::actor_cast<caf::strong_actor_ptr>(sys.spawn<SinkCompanion>());
  auto* self = core_->self = static_cast<SinkCompanion*>(caf::actor_cast<caf::abstract_actor*>(core_->actor));
  self->context(&core_->unit);
  // Removed by the destructor before `core_` can go (see there).
  self->on_enqueue([core = core_.get()](caf::mailbox_element_ptr m) { core->post(std::move(m)); });
  // The companion ends on its own only when something CAF caught ended it (what the handlers
  // throw leaves through core_->guard): its thread's calls fail rather than wait for nothing,
  // and later submissions are refused.
  self->on_exit([this] {
    core_->lost = true;
    core_->guard([&] {
      auto open = std::exchange(core_->open_submits, {});
      for (auto& [key, answer] : open) answer(link_lost);
      fail_all(link_lost);
    });
  });
  self->set_down_handler([this, self](const caf::down_msg& dm) {
    core_->guard([&] { fail_all("the engine stopped: " + self->system().render(dm.reason)); });
  });
  self->become([this](scheduler::SinkBatch& b) {
    core_->guard([&] {
      ChannelBatch c{std::move(b.tokens), std::move(b.finished), std::move(b.error), {}};
      dispatch(c);
    });
  });
  self->monitor(core_->scheduler);
}

EngineBridge::~EngineBridge() {
  detach();
  // The scheduler may hold the companion (a sink of requests it still runs) and send to it
  // after this: the enqueue handler goes first (taking the companion's lock, so that a send in
  // progress finishes before), and nothing reaches `core_` from then on.
  core_->self->on_enqueue({});
  core_->self->on_exit(std::function<void()>{});
  // Terminates the companion (CAF's cleanup, which does not call on_exit): its pending requests'
  // answers are dropped, whoever monitors it hears of it, the actor system no longer waits for it.
  core_->self->cleanup(caf::error{caf::exit_reason::user_shutdown}, &core_->unit);
}

void EngineBridge::detach() {
  std::lock_guard lock(core_->mu);
  core_->io = nullptr;
  core_->bridge = nullptr;
}

void EngineBridge::submit(std::vector<scheduler::RequestSpec> specs, Listener* listener,
                          std::function<void(SubmitOutcome)> done) {
  // The scheduler answers in order (on this thread, through the companion); the last answer
  // completes the call.
  struct Pending {
    std::vector<scheduler::RequestId> ids;
    std::vector<scheduler::SubmitStatus> status;
    std::size_t left = 0;
    bool unavailable = false;
    bool answered = false;
    std::uint64_t key = 0;  // in Core::open_submits
    Listener* listener = nullptr;
    std::function<void(SubmitOutcome)> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->status.resize(specs.size(), scheduler::SubmitStatus::unavailable);
  pending->left = specs.size();
  pending->listener = listener;
  pending->done = std::move(done);
  pending->ids.reserve(specs.size());
  for (const auto& s : specs) {
    pending->ids.push_back(s.id);
    listeners_[s.id] = Entry{listener, 0, 0};
  }
  // Hands the outcome over, unless the listener left meanwhile: then whatever the engine
  // accepted is aborted, so that nothing runs for nobody.
  auto hand_over = [this, pending](std::string reason) {
    if (std::exchange(pending->answered, true)) return;  // once: the scheduler's answers or on_exit
    core_->open_submits.erase(pending->key);
    const auto& ids = pending->ids;
    const auto it = ids.empty() ? listeners_.end() : listeners_.find(ids.front());
    if (!ids.empty() && (it == listeners_.end() || it->second.listener != pending->listener)) {
      for (std::size_t i = 0; i < ids.size(); ++i)
        if (pending->status[i] == scheduler::SubmitStatus::accepted) abort(ids[i]);
      return;
    }
    pending->done(SubmitOutcome{std::move(pending->status), std::move(reason)});
  };
  if (specs.empty()) return hand_over({});  // at once (documented)
  if (core_->lost) return hand_over(link_lost);
  SinkCompanion* self = core_->self;
  Core* core = core_.get();
  pending->key = core->next_submit++;
  core->open_submits.emplace(pending->key, hand_over);
  // The answers' handlers run inside the companion's activations (core->guard).
  auto finish = [self, core, hand_over, pending, scheduler = core_->scheduler] {
    if (!pending->unavailable) return core->guard([&] { hand_over({}); });
    // Say why, as the engine knows it.
    self->request(scheduler, caf::infinite, scheduler::sched_stats_atom::value)
        .then(
            [core, hand_over](const scheduler::EngineStats& s) {
              core->guard([&] { hand_over(s.failure.empty() ? "(no reason given)" : s.failure); });
            },
            [self, core, hand_over](const caf::error& e) {
              core->guard([&] { hand_over("the scheduler is gone: " + self->system().render(e)); });
            });
  };
  const auto sink = caf::actor_cast<scheduler::token_sink>(core_->actor);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    self->request(core_->scheduler, caf::infinite, std::move(specs[i]), sink)
        .then(
            [pending, i, finish](scheduler::SubmitStatus s) {
              pending->status[i] = s;
              if (s == scheduler::SubmitStatus::unavailable) pending->unavailable = true;
              if (--pending->left == 0) finish();
            },
            [pending, finish](const caf::error&) {  // the scheduler is gone
              pending->unavailable = true;
              if (--pending->left == 0) finish();
            });
  }
}

void EngineBridge::abort(scheduler::RequestId id) {
  caf::anon_send(core_->scheduler, scheduler::sched_abort_atom::value, id);
}

void EngineBridge::forget(scheduler::RequestId id) { listeners_.erase(id); }

void EngineBridge::dispatch(ChannelBatch& batch) {
  if (listeners_.empty()) return;
  // One batch per engine request touched by this step (a call with several prompts gets one
  // delivery per prompt): one hash lookup per event.
  const std::uint64_t gen = ++dispatches_;
  scratch_.clear();
  auto slot = [&](scheduler::RequestId id) -> ChannelBatch* {
    const auto it = listeners_.find(id);
    if (it == listeners_.end()) return nullptr;
    Entry& e = it->second;
    if (e.dispatch != gen) {
      e.dispatch = gen;
      e.slot = scratch_.size();
      scratch_.push_back(Slot{id, e.listener, {}});
    }
    return &scratch_[e.slot].batch;
  };
  for (auto& t : batch.tokens)
    if (auto* b = slot(t.request)) b->tokens.push_back(std::move(t));
  for (const auto& f : batch.finished)
    if (auto* b = slot(f.request)) {
      b->finished.push_back(f);
      if (f.reason == scheduler::FinishReason::error) b->error = batch.error;
    }
  // A listener may forget ids (its call ended) while being delivered to: collect first.
  auto work = std::move(scratch_);
  scratch_.clear();
  for (auto& w : work)
    if (listens(w.id, w.listener)) w.listener->deliver(std::move(w.batch));
  work.clear();
  scratch_ = std::move(work);  // keep the capacity
}

bool EngineBridge::listens(scheduler::RequestId id, const Listener* listener) const {
  const auto it = listeners_.find(id);
  return it != listeners_.end() && it->second.listener == listener;
}

void EngineBridge::fail_all(const std::string& why) {
  std::vector<std::pair<scheduler::RequestId, Listener*>> all;  // one id per listener
  for (const auto& [id, e] : listeners_)
    if (std::find_if(all.begin(), all.end(), [&](const auto& p) { return p.second == e.listener; }) == all.end())
      all.emplace_back(id, e.listener);
  for (const auto& [id, l] : all)
    if (listens(id, l)) {
      ChannelBatch b;
      b.failure = why;
      l->deliver(std::move(b));
    }
}

}  // namespace actorlm::http
