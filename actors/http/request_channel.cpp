#include "actors/http/request_channel.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace actorlm::http {

namespace {

scheduler::token_sink::behavior_type channel_sink(scheduler::token_sink::pointer self,
                                                  std::shared_ptr<RequestChannel::Shared> sh,
                                                  scheduler::scheduler_actor engine) {
  if (engine) {
    self->monitor(engine);
    self->set_down_handler([self, sh](const caf::down_msg& dm) {
      std::lock_guard lock(sh->mu);
      sh->pending.failure = "the engine stopped: " + self->system().render(dm.reason);
      sh->cv.notify_all();
    });
  }
  return {[sh](scheduler::SinkBatch& b) {
    std::lock_guard lock(sh->mu);
    auto& p = sh->pending;
    if (p.tokens.empty()) p.tokens = std::move(b.tokens);
    else p.tokens.insert(p.tokens.end(), b.tokens.begin(), b.tokens.end());
    p.finished.insert(p.finished.end(), b.finished.begin(), b.finished.end());
    if (!b.error.empty()) p.error = std::move(b.error);
    sh->cv.notify_all();
  }};
}

}  // namespace

RequestChannel::RequestChannel(caf::actor_system& sys, const scheduler::scheduler_actor& engine)
    : shared_(std::make_shared<Shared>()), sink_(sys.spawn(channel_sink, shared_, engine)) {}

RequestChannel::~RequestChannel() { caf::anon_send_exit(sink_, caf::exit_reason::user_shutdown); }

ChannelBatch RequestChannel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(shared_->mu);
  auto& p = shared_->pending;
  shared_->cv.wait_for(lock, timeout, [&] { return !p.tokens.empty() || !p.finished.empty() || !p.failure.empty(); });
  ChannelBatch out;
  out.tokens.swap(p.tokens);
  out.finished.swap(p.finished);
  out.error.swap(p.error);
  out.failure = p.failure;  // sticky: every later wait sees it too
  return out;
}

}  // namespace actorlm::http
