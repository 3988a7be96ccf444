#include "actors/http/completion_session.hpp"

#include "actors/http/request_spec.hpp"

#include <algorithm>
#include <mutex>
#include <random>
#include <utility>

namespace actorlm::http {

namespace {

std::uint64_t random_seed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mu);
  return rng();
}

}  // namespace

CompletionSession::CompletionSession(serving::ServedModel& model, CompletionRequest req, std::atomic<std::uint64_t>& ids)
    : model_(model), req_(std::move(req)), next_id_(ids) {}

std::optional<ApiError> CompletionSession::prepare() {
  // Prompts as token ids, checked against the vocabulary and the context length.
  const std::uint32_t vocab = model_.vocab_size();
  auto inputs = prompt_inputs(req_, model_.codec(), vocab, model_.max_model_len());
  if (auto* e = std::get_if<ApiError>(&inputs)) return *e;
  auto& prompts = std::get<std::vector<PromptInput>>(inputs);
  if (auto e = check_token_ids(req_, vocab)) return e;
  if (req_.echo && req_.logprobs && !model_.computes_prompt_logprobs())
    return bad_field("echo", "echo: with logprobs it needs the prompt's log-probabilities, which the backend "
                             "serving this model does not compute (the cuda backend does not yet)");
  if (req_.prompt_logprobs && !model_.computes_prompt_logprobs())
    return bad_field("prompt_logprobs", "prompt_logprobs: the backend serving this model does not compute the "
                                        "prompt's log-probabilities (the cuda backend does not yet)");
  std::vector<std::uint32_t> max_tokens;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const std::string field = req_.endpoint == Endpoint::chat ? "messages"
                              : prompts.size() > 1            ? "prompt[" + std::to_string(i) + "]"
                                                              : "prompt";
    auto m = max_tokens_for(req_, static_cast<std::uint32_t>(prompts[i].tokens.size()), model_.max_model_len(), field);
    if (auto* e = std::get_if<ApiError>(&m)) return *e;
    max_tokens.push_back(std::get<std::uint32_t>(m));
  }
  // best_of: the engine runs best_of samples per prompt (run() reads req_.n), n are returned.
  const std::uint32_t returned_n = req_.n, samples = req_.samples_per_prompt();
  req_.n = samples;
  returned_choices_ = static_cast<std::uint32_t>(prompts.size()) * returned_n;
  if (samples > returned_n)
    best_of_ = std::make_unique<BestOfSelector>(static_cast<std::uint32_t>(prompts.size()), returned_n, samples);

  const std::uint64_t seed = req_.seed.value_or(random_seed());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto len = static_cast<std::uint32_t>(prompts[i].tokens.size());
    // The prompts of one call differ in seed; a seed still reproduces the call.
    scheduler::RequestSpec spec =
        request_spec(req_, model_.request(next_id_.fetch_add(1), std::move(prompts[i].tokens), max_tokens[i]), seed + i);
    ids_.push_back(spec.id);
    prompt_lens_.push_back(len);
    echoes_.push_back(std::move(prompts[i].echo));
    if (req_.echo && req_.logprobs)
      echo_logprobs_.push_back({TokenLogprob{token_text(spec.prompt.front()), 0, {}, true}});
    if (req_.prompt_logprobs) prompt_scores_.emplace_back();
    max_tokens_.push_back(max_tokens[i]);
    specs_.push_back(std::move(spec));
  }
  return std::nullopt;
}

std::optional<ApiError> CompletionSession::on_submitted(const std::vector<scheduler::SubmitStatus>& status,
                                                        const std::string& reason) {
  for (std::size_t i = 0; i < status.size() && i < ids_.size(); ++i) {
    switch (status[i]) {
      case scheduler::SubmitStatus::accepted:
        continue;
      case scheduler::SubmitStatus::queue_full:
        return ApiError{429, "the server's waiting queue is full; retry later", "rate_limit_error", "", "queue_full"};
      case scheduler::SubmitStatus::unavailable:
        return ApiError{503, "the engine is unavailable and takes no new requests: " + reason, "service_unavailable", "",
                        "engine_unhealthy"};
      case scheduler::SubmitStatus::too_long:
        return ApiError{400, "max_tokens: the prompt (" + std::to_string(prompt_lens_[i]) + " tokens) plus max_tokens (" +
                                 std::to_string(max_tokens_[i]) + ") can never fit in the KV cache or the step's token budget",
                        "invalid_request_error", "max_tokens", "context_length_exceeded"};
      default:
        return ApiError{400, "the engine refused the request's parameters", "invalid_request_error", "", "invalid_value"};
    }
  }
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    prompt_tokens_ += prompt_lens_[i];
    cached_lens_.push_back(0);
    released_.push_back(false);
    ended_samples_.push_back(0);
    for (std::uint32_t s = 0; s < req_.n; ++s)
      choices_.push_back(Choice{model_.codec().detokenizer(req_.skip_special_tokens),
                                StopMatcher(req_.stop, req_.include_stop_str_in_output), false, echoes_[i]});
  }
  return std::nullopt;
}

std::string CompletionSession::token_text(model::Token t) const {
  return req_.return_tokens_as_token_ids ? "token_id:" + std::to_string(t) : model_.codec().token_text(t);
}

std::vector<ChoiceDelta> CompletionSession::on_batch(const ChannelBatch& b) {
  std::vector<ChoiceDelta> out;
  if (!b.failure.empty() && b.tokens.empty() && b.finished.empty()) {  // the engine stopped
    failure_ = b.failure;
    std::fill(ended_samples_.begin(), ended_samples_.end(), req_.n);  // nothing left to abort
    return out;
  }
  auto index_of = [&](scheduler::RequestId id, std::uint32_t sample) -> std::uint32_t {
    for (std::size_t p = 0; p < ids_.size(); ++p)
      if (ids_[p] == id) return static_cast<std::uint32_t>(p) * req_.n + sample;
    return UINT32_MAX;
  };
  auto delta_for = [&](std::uint32_t index) -> ChoiceDelta& {
    for (auto& d : out)
      if (d.index == index) return d;
    out.push_back(ChoiceDelta{index, {}, {}, std::nullopt, std::nullopt});
    return out.back();
  };
  // The token a sample ended on with FinishReason::stop is its stop token (EOS, end of turn,
  // stop_token_ids): its text is left out unless include_stop_str_in_output (vLLM's detokenizer).
  std::vector<bool> stop_token(b.tokens.size(), false);
  if (!req_.include_stop_str_in_output)
    for (const auto& f : b.finished)
      if (f.reason == scheduler::FinishReason::stop)
        for (std::size_t k = b.tokens.size(); k-- > 0;)
          if (b.tokens[k].request == f.request && b.tokens[k].sample == f.sample) {
            stop_token[k] = true;
            break;
          }
  for (std::size_t k = 0; k < b.tokens.size(); ++k) {
    const auto& t = b.tokens[k];
    const auto index = index_of(t.request, t.sample);
    if (index >= choices_.size()) continue;
    cached_lens_[index / req_.n] = t.cached_prompt_tokens;
    Choice& c = choices_[index];
    if (c.done) continue;  // stopped by a stop string; its request runs until all its samples are done
    if (first_token_ == std::chrono::steady_clock::time_point{}) first_token_ = std::chrono::steady_clock::now();
    if (!best_of_) ++completion_tokens_;  // best_of: the returned choices' tokens, once known
    ++c.tokens;
    c.cumulative_logprob += t.logprob;
    // The prompt's scores come with the request's first token; the shards compute the larger
    // k of echo's logprobs and prompt_logprobs, and each takes its own.
    if (!t.prompt_logprobs.empty() && index / req_.n < echo_logprobs_.size()) {
      auto& lps = echo_logprobs_[index / req_.n];
      for (const auto& e : t.prompt_logprobs) {
        TokenLogprob lp{token_text(e.token), e.logprob, {}};
        for (std::size_t k = 0; k < e.top.size() && k < req_.top_logprobs; ++k)
          lp.top.emplace_back(token_text(e.top[k].token), e.top[k].logprob);
        lps.push_back(std::move(lp));
      }
    }
    if (!t.prompt_logprobs.empty() && index / req_.n < prompt_scores_.size()) {
      auto& scores = prompt_scores_[index / req_.n];
      const auto& codec = model_.codec();  // decoded_token: the text, even with return_tokens_as_token_ids
      for (const auto& e : t.prompt_logprobs) {
        PromptTokenScore p{e.token, codec.token_text(e.token), e.logprob, e.rank, {}};
        for (std::size_t k = 0; k < e.top.size() && k < *req_.prompt_logprobs; ++k)
          p.top.push_back({e.top[k].token, codec.token_text(e.top[k].token), e.top[k].logprob});
        scores.push_back(std::move(p));
      }
    }
    ChoiceDelta& d = delta_for(index);
    d.text += std::exchange(c.echo, {});
    if (!std::exchange(c.echoed, true) && index / req_.n < echo_logprobs_.size())
      d.logprobs = echo_logprobs_[index / req_.n];  // the first delta of the choice: none yet
    // vLLM's min_tokens: no stop string ends in the text of the first min_tokens tokens.
    if (!stop_token[k]) d.text += c.stop.push(c.detok->push(t.token), c.tokens > req_.min_tokens);
    if (req_.logprobs) {
      TokenLogprob lp{token_text(t.token), t.logprob, {}};
      for (const auto& top : t.top) lp.top.emplace_back(token_text(top.token), top.logprob);
      d.logprobs.push_back(std::move(lp));
    }
    if (c.stop.stopped()) {
      c.done = true;
      d.finish_reason = "stop";
      ++finished_;
    }
  }
  for (const auto& f : b.finished) {
    const auto index = index_of(f.request, f.sample);
    if (index >= choices_.size()) continue;
    ++ended_samples_[index / req_.n];
    if (choices_[index].done) continue;
    Choice& c = choices_[index];
    if (f.reason == scheduler::FinishReason::error) {  // no delta: the caller reports the failure
      c.done = true;
      ++finished_;
      if (failure_.empty()) failure_ = b.error.empty() ? "the engine failed the request" : b.error;
      continue;
    }
    ChoiceDelta& d = delta_for(index);
    d.text += std::exchange(c.echo, {});
    d.text += c.stop.push(c.detok->flush(), c.tokens > req_.min_tokens);
    d.text += c.stop.flush();
    c.done = true;
    d.finish_reason = f.reason == scheduler::FinishReason::length ? "length" : "stop";
    ++finished_;
  }
  if (req_.continuous_usage_stats)
    for (auto& d : out) d.usage = Usage{prompt_lens_[d.index / req_.n], choices_[d.index].tokens, std::nullopt};
  if (!best_of_) return out;
  std::vector<ChoiceDelta> released;
  for (const auto& d : out)
    for (auto& c : best_of_->add(d, choices_[d.index].cumulative_logprob, choices_[d.index].tokens))
      released.push_back(std::move(c));
  completion_tokens_ = best_of_->returned_tokens();
  return released;
}

std::uint64_t CompletionSession::cached_prompt_tokens() const {
  std::uint64_t sum = 0;
  for (const auto c : cached_lens_) sum += c;
  return sum;
}

std::vector<scheduler::RequestId> CompletionSession::take_released() {
  std::vector<scheduler::RequestId> out;
  for (std::size_t p = 0; p < ids_.size() && p < released_.size(); ++p) {
    if (released_[p] || ended_samples_[p] == req_.n) continue;
    bool all = true;
    for (std::uint32_t s = 0; s < req_.n && all; ++s) all = choices_[p * req_.n + s].done;
    if (all) {
      released_[p] = true;
      out.push_back(ids_[p]);
    }
  }
  return out;
}

std::vector<scheduler::RequestId> CompletionSession::unfinished() const {
  std::vector<scheduler::RequestId> out;
  for (std::size_t p = 0; p < ids_.size() && p < released_.size(); ++p)
    if (!released_[p] && ended_samples_[p] < req_.n) out.push_back(ids_[p]);
  return out;
}

}  // namespace actorlm::http
