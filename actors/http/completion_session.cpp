#include "actors/http/completion_session.hpp"

#include <random>

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
  // Prompts as token ids, each checked against the context length and the vocabulary.
  std::vector<std::vector<model::Token>> prompts;
  const bool chat = req_.endpoint == Endpoint::chat;
  if (chat) {
    prompts.push_back(model_.chat_prompt(req_.messages));
  } else {
    for (std::size_t i = 0; i < req_.prompts.size(); ++i) {
      const Prompt& p = req_.prompts[i];
      const std::string field = req_.prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "prompt";
      if (!p.is_tokens) {
        prompts.push_back(model_.raw_prompt(p.text));
      } else {
        std::vector<model::Token> t;
        for (auto id : p.tokens) {
          if (id >= model_.vocab_size())
            return bad_field(field, field + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                        std::to_string(model_.vocab_size()) + ")");
          t.push_back(static_cast<model::Token>(id));
        }
        prompts.push_back(std::move(t));
      }
      if (prompts.back().empty()) return bad_field(field, field + ": the prompt is empty");
    }
  }
  const std::uint32_t limit = model_.max_model_len();
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto len = static_cast<std::uint32_t>(prompts[i].size());
    const std::string field = chat ? "messages" : (prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "prompt");
    if (len >= limit)
      return ApiError{400, field + ": the prompt has " + std::to_string(len) + " tokens; the context length is " +
                               std::to_string(limit), "invalid_request_error", field, "context_length_exceeded"};
    const std::uint32_t max_tokens = req_.max_tokens.value_or(chat ? limit - len : 16);
    if (len + max_tokens > limit)
      return ApiError{400, "max_tokens: the prompt (" + std::to_string(len) + " tokens) plus max_tokens (" +
                               std::to_string(max_tokens) + ") is more than the context length (" + std::to_string(limit) + ")",
                      "invalid_request_error", "max_tokens", "context_length_exceeded"};
  }
  const std::uint64_t seed = req_.seed.value_or(random_seed());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto len = static_cast<std::uint32_t>(prompts[i].size());
    const std::uint32_t max_tokens = req_.max_tokens.value_or(chat ? limit - len : 16);
    scheduler::RequestSpec spec = model_.request(next_id_.fetch_add(1), std::move(prompts[i]), max_tokens);
    spec.n = req_.n;
    spec.priority = req_.priority;
    spec.sampling.temperature = req_.temperature;
    spec.sampling.top_p = req_.top_p;
    spec.sampling.top_k = req_.top_k;
    spec.sampling.min_p = req_.min_p;
    spec.sampling.seed = seed + i;  // the prompts of one call differ; a seed still reproduces the call
    spec.sampling.logprobs = req_.logprobs;
    spec.sampling.top_logprobs = req_.top_logprobs;
    spec.sampling.presence_penalty = req_.presence_penalty;
    spec.sampling.frequency_penalty = req_.frequency_penalty;
    ids_.push_back(spec.id);
    prompt_lens_.push_back(len);
    specs_.push_back(std::move(spec));
  }
  return std::nullopt;
}

std::optional<ApiError> CompletionSession::on_submitted(const std::vector<scheduler::SubmitStatus>& status,
                                                        const std::string& reason) {
  for (std::size_t i = 0; i < status.size() && i < ids_.size(); ++i) {
    const std::uint32_t len = prompt_lens_[i];
    const std::uint32_t max_tokens = req_.max_tokens.value_or(req_.endpoint == Endpoint::chat ? model_.max_model_len() - len : 16);
    switch (status[i]) {
      case scheduler::SubmitStatus::accepted:
        continue;
      case scheduler::SubmitStatus::queue_full:
        return ApiError{429, "the server's waiting queue is full; retry later", "rate_limit_error", "", "queue_full"};
      case scheduler::SubmitStatus::unavailable:
        return ApiError{503, "the engine is unavailable and takes no new requests: " + reason, "service_unavailable", "",
                        "engine_unhealthy"};
      case scheduler::SubmitStatus::too_long:
        return ApiError{400, "max_tokens: the prompt (" + std::to_string(len) + " tokens) plus max_tokens (" +
                                 std::to_string(max_tokens) + ") can never fit in the KV cache or the step's token budget",
                        "invalid_request_error", "max_tokens", "context_length_exceeded"};
      default:
        return ApiError{400, "the engine refused the request's parameters", "invalid_request_error", "", "invalid_value"};
    }
  }
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    prompt_tokens_ += prompt_lens_[i];
    released_.push_back(false);
    ended_samples_.push_back(0);
    for (std::uint32_t s = 0; s < req_.n; ++s)
      choices_.push_back(Choice{model_.codec().detokenizer(), StopMatcher(req_.stop), false});
  }
  return std::nullopt;
}

std::vector<ChoiceDelta> CompletionSession::on_batch(const ChannelBatch& b) {
  std::vector<ChoiceDelta> out;
  if (!b.failure.empty() && b.tokens.empty() && b.finished.empty()) {
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
    out.push_back(ChoiceDelta{index, {}, {}, std::nullopt});
    return out.back();
  };
  const auto& codec = model_.codec();
  for (const auto& t : b.tokens) {
    const auto index = index_of(t.request, t.sample);
    if (index >= choices_.size()) continue;
    Choice& c = choices_[index];
    if (c.done) continue;  // stopped by a stop string; its request runs until all its samples are done
    if (first_token_ == std::chrono::steady_clock::time_point{}) first_token_ = std::chrono::steady_clock::now();
    ++completion_tokens_;
    ChoiceDelta& d = delta_for(index);
    d.text += c.stop.push(c.detok->push(t.token));
    if (req_.logprobs) {
      TokenLogprob lp{codec.token_text(t.token), t.logprob, {}};
      for (const auto& top : t.top) lp.top.emplace_back(codec.token_text(top.token), top.logprob);
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
    d.text += c.stop.push(c.detok->flush());
    d.text += c.stop.flush();
    c.done = true;
    d.finish_reason = f.reason == scheduler::FinishReason::length ? "length" : "stop";
    ++finished_;
  }
  return out;
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
