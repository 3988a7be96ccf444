#pragma once
// A token sink for blocking callers (the CLI, benchmarks, tests): gathers each request's
// tokens per sample and lets a thread wait until requests finish. Optionally calls
// `on_token` for every token as it arrives (on the sink actor's thread), e.g. to stream text;
// an exception it throws is recorded as the failure, not lost. When given the engine's
// scheduler, the sink monitors it: if the engine stops, waiters wake up with its reason.

#include "actors/scheduler/scheduler_protocol.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace caf { class actor_system; }

namespace actorlm::engine {

struct Completion {
  std::vector<std::vector<scheduler::TokenId>> samples;  // [n][tokens]
  std::vector<scheduler::FinishReason> reasons;          // [n], as samples finish
  std::chrono::steady_clock::time_point first_token, finished;
};

class Completions {
 public:
  using TokenCallback = std::function<void(const scheduler::TokenEvent&)>;
  Completions(caf::actor_system& sys, std::uint32_t samples_per_request = 1, TokenCallback on_token = {},
              const scheduler::scheduler_actor& engine = {});
  ~Completions();

  const scheduler::token_sink& sink() const { return sink_; }
  // Waits until `count` requests have finished all their samples; false on timeout or failure.
  bool wait_finished(std::size_t count, std::chrono::milliseconds timeout);
  // Why waiting stopped early: the engine stopped, a request ended with FinishReason::error (its
  // SinkBatch::error), or on_token threw. Empty when all is well.
  std::string failure() const;
  std::map<scheduler::RequestId, Completion> take();

 private:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::map<scheduler::RequestId, Completion> done;
    std::size_t finished = 0;
    std::uint32_t n = 1;
    TokenCallback on_token;
    std::string failure;
  };
  std::shared_ptr<Shared> shared_;
  scheduler::token_sink sink_;
};

}  // namespace actorlm::engine
