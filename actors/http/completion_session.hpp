#pragma once
// One accepted API request on its way through the engine: its prompts become engine requests
// (choice index = prompt index * n + sample), their tokens become text per choice (incremental
// detokenization, stop strings across token boundaries, logprobs), and each new piece is
// handed to the caller: the server streams it (SSE) or gathers it (one JSON response).

#include "actors/http/api_error.hpp"
#include "actors/http/openai_request.hpp"
#include "actors/http/request_channel.hpp"
#include "actors/http/stop_strings.hpp"
#include "actors/serving/served_model.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>

namespace actorlm::http {

struct TokenLogprob {
  std::string token;                                   // the token's text (bytes)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;      // most likely tokens at this position
};

// What one pump of the session produced for one choice.
struct ChoiceDelta {
  std::uint32_t index = 0;
  std::string text;
  std::vector<TokenLogprob> logprobs;                  // tokens completed by this piece
  std::optional<std::string> finish_reason;            // "stop" | "length" on its last delta
};

class CompletionSession {
 public:
  CompletionSession(caf::actor_system&, serving::ServedModel&, CompletionRequest, std::atomic<std::uint64_t>& ids);
  ~CompletionSession();  // aborts whatever is still running

  // Tokenizes, checks lengths and submits; an error means nothing is running.
  std::optional<ApiError> start();
  // Pumps events until every choice has finished. `emit` gets each delta and returns false when
  // the client has gone; `alive` is polled while nothing arrives and returns false likewise.
  // Either makes the session abort its engine requests and return false, as does an engine failure
  // or a sample that ends with FinishReason::error (see failure(): then the other engine requests of
  // the call are aborted, and the tokens of the batch that carried the error were emitted first).
  bool run(const std::function<bool(const ChoiceDelta&)>& emit, const std::function<bool()>& alive);

  const CompletionRequest& request() const { return req_; }
  std::uint32_t choices() const { return static_cast<std::uint32_t>(choices_.size()); }
  std::uint64_t prompt_tokens() const { return prompt_tokens_; }
  std::uint64_t completion_tokens() const { return completion_tokens_; }
  const std::string& failure() const { return failure_; }
  std::chrono::steady_clock::time_point first_token() const { return first_token_; }
  std::uint64_t first_request_id() const { return ids_.empty() ? 0 : ids_.front(); }

 private:
  struct Choice {
    std::unique_ptr<serving::Detokenizer> detok;
    StopMatcher stop;
    bool done = false;
  };
  std::vector<ChoiceDelta> on_batch(const ChannelBatch&);
  void abort_all();
  std::string engine_failure() const;  // why the engine is unhealthy, for a refused submission

  caf::actor_system& sys_;
  serving::ServedModel& model_;
  CompletionRequest req_;
  std::atomic<std::uint64_t>& next_id_;
  std::vector<std::uint64_t> ids_;                     // engine request per prompt
  std::vector<bool> released_;                         // per prompt: all its choices done
  std::unique_ptr<RequestChannel> channel_;
  std::vector<Choice> choices_;
  std::uint32_t finished_ = 0;
  std::uint64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  std::string failure_;
  std::chrono::steady_clock::time_point first_token_{};
};

}  // namespace actorlm::http
