#include "actors/engine/completions.hpp"

#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace actorlm::engine {

namespace {

template <class Shared>
void fail(Shared& sh, std::string why) {
  std::lock_guard lock(sh.mu);
  if (sh.failure.empty()) sh.failure = std::move(why);
  sh.cv.notify_all();
}

template <class Shared>
scheduler::token_sink::behavior_type completion_sink(scheduler::token_sink::pointer self,
                                                     std::shared_ptr<Shared> sh,
                                                     scheduler::scheduler_actor engine) {
  if (engine) {
    self->monitor(engine);
    self->set_down_handler([self, sh](const caf::down_msg& dm) {
      fail(*sh, "the engine stopped: " + self->system().render(dm.reason));
    });
  }
  return {[sh](const scheduler::SinkBatch& b) {
    const auto now = std::chrono::steady_clock::now();
    if (sh->on_token) {
      try {
        for (const auto& t : b.tokens) sh->on_token(t);
      } catch (const std::exception& e) {
        fail(*sh, std::string("token callback: ") + e.what());
      }
    }
    std::lock_guard lock(sh->mu);
    for (const auto& t : b.tokens) {
      auto& c = sh->done[t.request];
      if (c.samples.size() <= t.sample) c.samples.resize(t.sample + 1);
      if (c.samples[t.sample].empty() && t.sample == 0) c.first_token = now;
      c.samples[t.sample].push_back(t.token);
    }
    for (const auto& f : b.finished) {
      auto& c = sh->done[f.request];
      c.reasons.push_back(f.reason);
      if (f.reason == scheduler::FinishReason::error && sh->failure.empty())
        sh->failure = "request " + std::to_string(f.request) + " failed: " + b.error;
      if (c.reasons.size() == sh->n) {
        c.finished = now;
        ++sh->finished;
      }
    }
    sh->cv.notify_all();
  }};
}

}  // namespace

Completions::Completions(caf::actor_system& sys, std::uint32_t n, TokenCallback on_token,
                         const scheduler::scheduler_actor& engine)
    : shared_(std::make_shared<Shared>()) {
  shared_->n = n;
  shared_->on_token = std::move(on_token);
  sink_ = sys.spawn(completion_sink<Shared>, shared_, engine);
}

std::string Completions::failure() const {
  std::lock_guard lock(shared_->mu);
  return shared_->failure;
}

Completions::~Completions() { caf::anon_send_exit(sink_, caf::exit_reason::user_shutdown); }

bool Completions::wait_finished(std::size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(shared_->mu);
  return shared_->cv.wait_for(lock, timeout,
                              [&] { return shared_->finished >= count || !shared_->failure.empty(); }) &&
         shared_->failure.empty();
}

std::map<scheduler::RequestId, Completion> Completions::take() {
  std::lock_guard lock(shared_->mu);
  shared_->finished = 0;
  return std::exchange(shared_->done, {});
}

}  // namespace actorlm::engine
