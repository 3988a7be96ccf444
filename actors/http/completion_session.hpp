#pragma once
// One accepted API request on its way through the engine: its prompts become engine requests
// (choice index = prompt index * n + sample), their tokens become text per choice (incremental
// detokenization, stop strings across token boundaries, logprobs), and each new piece is
// handed to the caller: the server streams it (SSE) or gathers it (one JSON response).

#include "actors/http/api_error.hpp"
#include "actors/http/best_of.hpp"
#include "actors/http/choice_delta.hpp"
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

  // The request; from start() on, its n is the engine's samples per prompt (best_of when
  // given: run() reads it so), and choices() the number of choices returned.
  const CompletionRequest& request() const { return req_; }
  std::uint32_t choices() const { return returned_choices_; }
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
    std::string echo;                  // echo: the prompt's text, put in front of the first delta
    std::uint32_t tokens = 0;          // generated so far
    double cumulative_logprob = 0;     // of those tokens (best_of)
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
  std::vector<Choice> choices_;                        // [prompts * samples per prompt]
  std::vector<std::uint32_t> prompt_lens_;             // per prompt, in tokens
  std::uint32_t returned_choices_ = 0;                 // prompts * n
  std::unique_ptr<BestOfSelector> best_of_;            // when best_of > n
  std::uint32_t finished_ = 0;
  std::uint64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  std::string failure_;
  std::chrono::steady_clock::time_point first_token_{};
};

}  // namespace actorlm::http
