#include "actors/http/engine_bridge.hpp"

#include "actors/engine/engine.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>

#include <algorithm>
#include <mutex>

namespace actorlm::http {

namespace {

// Submissions of one API call, handed from the I/O thread to the sink actor (local only).
struct SubmitJob {
  std::vector<scheduler::RequestSpec> specs;
  std::function<void(SubmitOutcome)> done;  // runs on the actor's thread; it posts to the I/O thread
};

using submit_atom = caf::atom_constant<caf::atom("h_submit")>;

}  // namespace
}  // namespace actorlm::http

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<actorlm::http::SubmitJob>)

namespace actorlm::http {

// What the actor and the I/O thread share. `io` and `bridge` are cleared by the bridge's
// destructor: the actor then posts nothing more, and handlers already posted do nothing.
struct EngineBridge::Core {
  std::mutex mu;
  boost::asio::io_context* io = nullptr;
  EngineBridge* bridge = nullptr;  // read on the I/O thread only
  scheduler::scheduler_actor scheduler;
  caf::actor actor;

  template <class F>
  void post(F f) {
    std::lock_guard lock(mu);
    if (!io) return;
    boost::asio::post(*io, [this, keep = holder.lock(), f = std::move(f)]() mutable {
      if (bridge) f(*bridge);
    });
  }
  std::weak_ptr<Core> holder;  // this Core, for the posted handlers to keep it alive
};

namespace {

void answer(const std::shared_ptr<SubmitJob>& job, std::vector<scheduler::SubmitStatus> status, std::string reason) {
  job->done(SubmitOutcome{std::move(status), std::move(reason)});
}

caf::behavior sink_actor(caf::event_based_actor* self, std::shared_ptr<EngineBridge::Core> core) {
  const auto scheduler = core->scheduler;
  self->monitor(scheduler);
  self->set_down_handler([self, core](const caf::down_msg& dm) {
    const std::string why = "the engine stopped: " + self->system().render(dm.reason);
    core->post([why](EngineBridge& b) { b.fail_all(why); });
  });
  return {
      [core](scheduler::SinkBatch& b) {
        ChannelBatch c{std::move(b.tokens), std::move(b.finished), std::move(b.error), {}};
        core->post([c = std::move(c)](EngineBridge& bridge) mutable { bridge.dispatch(c); });
      },
      [self, scheduler](submit_atom, std::shared_ptr<SubmitJob> job) {
        // The scheduler answers in order; the last answer completes the job.
        struct Pending {
          std::vector<scheduler::SubmitStatus> status;
          std::size_t left = 0;
          bool unavailable = false;
        };
        auto pending = std::make_shared<Pending>();
        pending->status.resize(job->specs.size(), scheduler::SubmitStatus::unavailable);
        pending->left = job->specs.size();
        if (pending->left == 0) return answer(job, {}, {});
        const auto sink = caf::actor_cast<scheduler::token_sink>(self);
        auto finish = [self, scheduler, job, pending] {
          if (!pending->unavailable) return answer(job, std::move(pending->status), {});
          // Say why, as the engine knows it.
          self->request(scheduler, caf::infinite, scheduler::sched_stats_atom::value)
              .then([job, pending](const scheduler::EngineStats& s) {
                      answer(job, std::move(pending->status), s.failure.empty() ? "(no reason given)" : s.failure);
                    },
                    [self, job, pending](const caf::error& e) {
                      answer(job, std::move(pending->status), "the scheduler is gone: " + self->system().render(e));
                    });
        };
        for (std::size_t i = 0; i < job->specs.size(); ++i) {
          self->request(scheduler, caf::infinite, std::move(job->specs[i]), sink)
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
      },
  };
}

}  // namespace

EngineBridge::EngineBridge(caf::actor_system& sys, engine::Engine& engine, boost::asio::io_context& io)
    : core_(std::make_shared<Core>()) {
  core_->holder = core_;
  core_->io = &io;
  core_->bridge = this;
  core_->scheduler = engine.actors().scheduler;
  core_->actor = sys.spawn(sink_actor, core_);
}

EngineBridge::~EngineBridge() {
  detach();
  caf::anon_send_exit(core_->actor, caf::exit_reason::user_shutdown);
}

void EngineBridge::detach() {
  std::lock_guard lock(core_->mu);
  core_->io = nullptr;
  core_->bridge = nullptr;
}

void EngineBridge::submit(std::vector<scheduler::RequestSpec> specs, Listener* listener,
                          std::function<void(SubmitOutcome)> done) {
  std::vector<scheduler::RequestId> ids;
  ids.reserve(specs.size());
  for (const auto& s : specs) {
    ids.push_back(s.id);
    listeners_[s.id] = Entry{listener, 0, 0};
  }
  auto job = std::make_shared<SubmitJob>();
  job->specs = std::move(specs);
  // Back on the I/O thread: hand the outcome over, unless the listener left meanwhile.
  job->done = [core = core_, ids = std::move(ids), listener, done = std::move(done)](SubmitOutcome o) mutable {
    core->post([ids = std::move(ids), listener, done = std::move(done), o = std::move(o)](EngineBridge& b) mutable {
      const auto it = ids.empty() ? b.listeners_.end() : b.listeners_.find(ids.front());
      if (!ids.empty() && (it == b.listeners_.end() || it->second.listener != listener)) {
        for (std::size_t i = 0; i < ids.size(); ++i)
          if (o.status[i] == scheduler::SubmitStatus::accepted) b.abort(ids[i]);
        return;
      }
      done(std::move(o));
    });
  };
  caf::anon_send(core_->actor, submit_atom::value, std::move(job));
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
