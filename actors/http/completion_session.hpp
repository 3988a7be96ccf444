#pragma once
// One accepted API request on its way through the engine: its prompts become engine requests
// (choice index = prompt index * n + sample), their tokens become text per choice (incremental
// detokenization, stop strings across token boundaries, logprobs), and each new piece is
// handed to the caller: the server streams it (SSE) or gathers it (one JSON response).

#include "actors/http/api_error.hpp"
#include "actors/http/best_of.hpp"
#include "actors/http/choice_delta.hpp"
#include "actors/http/openai_request.hpp"
#include "actors/http/engine_bridge.hpp"
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
  CompletionSession(serving::ServedModel&, CompletionRequest, std::atomic<std::uint64_t>& ids);

  // Tokenizes and checks lengths, and builds the engine requests; an error means nothing is to
  // run. Then take_specs() once, submit them, and hand the engine's answers to on_submitted().
  std::optional<ApiError> prepare();
  std::vector<scheduler::RequestSpec> take_specs() { return std::move(specs_); }
  // One status per spec, in order (`reason`: why the engine is unavailable, when it is). An
  // error means the call is refused: the caller aborts the ids() that were accepted.
  std::optional<ApiError> on_submitted(const std::vector<scheduler::SubmitStatus>&, const std::string& reason);

  // The text, logprobs and finish reasons that a batch of engine events makes, per choice. An
  // engine failure, or a sample that ends with FinishReason::error, sets failure() (the tokens
  // of the batch that carried the error come out first): the call then fails as a whole.
  std::vector<ChoiceDelta> on_batch(const ChannelBatch&);
  // Every choice has finished (or the call failed).
  bool done() const { return finished_ == choices_.size() || !failure_.empty(); }
  // Engine requests whose every choice a stop string ended: abort them, the engine need not
  // finish them. Each is returned once.
  std::vector<scheduler::RequestId> take_released();
  // Engine requests that may still run: what to abort when the call is abandoned.
  std::vector<scheduler::RequestId> unfinished() const;
  const std::vector<scheduler::RequestId>& ids() const { return ids_; }

  // The request; from prepare() on, its n is the engine's samples per prompt (best_of when
  // given), and choices() the number of choices returned.
  const CompletionRequest& request() const { return req_; }
  std::uint32_t choices() const { return returned_choices_; }
  std::uint64_t prompt_tokens() const { return prompt_tokens_; }
  std::uint64_t completion_tokens() const { return completion_tokens_; }
  // Prompt tokens the prefix cache served, over every prompt (known once its first token came).
  std::uint64_t cached_prompt_tokens() const;
  const std::string& failure() const { return failure_; }
  std::chrono::steady_clock::time_point first_token() const { return first_token_; }
  std::uint64_t first_request_id() const { return ids_.empty() ? 0 : ids_.front(); }
  // vLLM's prompt_logprobs of returned choice `i`'s prompt (complete once its first token
  // came), or nullptr when the request did not ask.
  const std::vector<PromptTokenScore>* prompt_scores_of_choice(std::size_t i) const {
    const std::size_t prompt = prompt_scores_.empty() ? 0 : i / (returned_choices_ / prompt_scores_.size());
    return prompt < prompt_scores_.size() ? &prompt_scores_[prompt] : nullptr;
  }

 private:
  // A token as logprobs name it: its text, or "token_id:{id}" (return_tokens_as_token_ids).
  std::string token_text(model::Token) const;
  struct Choice {
    std::unique_ptr<serving::Detokenizer> detok;
    StopMatcher stop;
    bool done = false;
    std::string echo;                  // echo: the prompt's text, put in front of the first delta
    bool echoed = false;               // with the prompt's logprobs when asked (echo_logprobs_)
    std::uint32_t tokens = 0;          // generated so far
    double cumulative_logprob = 0;     // of those tokens (best_of)
  };

  serving::ServedModel& model_;
  CompletionRequest req_;
  std::atomic<std::uint64_t>& next_id_;
  std::vector<scheduler::RequestSpec> specs_;          // built by prepare()
  std::vector<scheduler::RequestId> ids_;              // engine request per prompt
  std::vector<std::uint32_t> prompt_lens_;             // per prompt, in tokens
  std::vector<std::uint32_t> cached_lens_;             // per prompt: of prompt_lens_, from the prefix cache
  std::vector<std::string> echoes_;                    // per prompt: its text, when echo is set
  // echo with logprobs: per prompt, its tokens' logprobs (the first unconditioned, the rest from
  // the engine's first token event), put in front of each of its choices' logprobs.
  std::vector<std::vector<TokenLogprob>> echo_logprobs_;
  std::vector<std::vector<PromptTokenScore>> prompt_scores_;  // per prompt, with prompt_logprobs
  std::vector<std::uint32_t> max_tokens_;              // per prompt
  std::vector<bool> released_;                         // per prompt: all its choices done, aborted
  std::vector<std::uint32_t> ended_samples_;           // per prompt: samples the engine finished
  std::vector<Choice> choices_;                        // [prompts * samples per prompt]
  std::uint32_t returned_choices_ = 0;                 // prompts * n
  std::unique_ptr<BestOfSelector> best_of_;            // when best_of > n
  std::uint32_t finished_ = 0;
  std::uint64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  std::string failure_;
  std::chrono::steady_clock::time_point first_token_{};
};

}  // namespace actorlm::http
