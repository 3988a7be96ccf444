#pragma once
// Carries one HTTP request's token events from the engine (a token-sink actor) to the HTTP
// thread serving it, which waits on a condition variable. One channel may carry several engine
// requests (a completions call with several prompts). If the engine stops, the waiter wakes up
// with the reason instead of hanging.

#include "actors/scheduler/scheduler_protocol.hpp"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace caf { class actor_system; }

namespace actorlm::http {

struct ChannelBatch {
  std::vector<scheduler::TokenEvent> tokens;
  std::vector<scheduler::FinishEvent> finished;
  std::string error;    // what failed, when some of `finished` are FinishReason::error
  std::string failure;  // the engine stopped
};

class RequestChannel {
 public:
  RequestChannel(caf::actor_system&, const scheduler::scheduler_actor& engine);
  ~RequestChannel();
  RequestChannel(const RequestChannel&) = delete;
  RequestChannel& operator=(const RequestChannel&) = delete;

  const scheduler::token_sink& sink() const { return sink_; }
  // Everything that arrived since the last call, waiting up to `timeout` for something.
  ChannelBatch wait(std::chrono::milliseconds timeout);

  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    ChannelBatch pending;
  };

 private:
  std::shared_ptr<Shared> shared_;
  scheduler::token_sink sink_;
};

}  // namespace actorlm::http
