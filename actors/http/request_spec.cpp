#include "actors/http/request_spec.hpp"

#include <algorithm>

namespace actorlm::http {

namespace {

std::string prompt_field(const CompletionRequest& r, std::size_t i) {
  if (r.endpoint == Endpoint::chat) return "messages";
  return r.prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "prompt";
}

std::string decoded(const serving::TextCodec& codec, const std::vector<model::Token>& tokens) {
  auto detok = codec.detokenizer(false);
  std::string text;
  for (auto t : tokens) text += detok->push(t);
  return text + detok->flush();
}

// vLLM's truncate_prompt_tokens: the prompt's last `keep` tokens (the echo then shows those).
void truncate(PromptInput& in, std::size_t keep, bool echo, const serving::TextCodec& codec) {
  if (in.tokens.size() <= keep) return;
  in.tokens.erase(in.tokens.begin(), in.tokens.end() - static_cast<std::ptrdiff_t>(keep));
  if (echo) in.echo = decoded(codec, in.tokens);
}

std::variant<std::vector<PromptInput>, ApiError> tokenized(const CompletionRequest& r, const serving::TextCodec& codec,
                                                           std::uint32_t vocab_size) {
  std::vector<PromptInput> out;
  if (r.endpoint == Endpoint::chat) {
    const model::ChatOptions chat{r.add_generation_prompt, r.continue_final_message};
    out.push_back({codec.chat_prompt(r.messages, chat, r.add_special_tokens), {}});
    return out;
  }
  for (std::size_t i = 0; i < r.prompts.size(); ++i) {
    const Prompt& p = r.prompts[i];
    const std::string field = prompt_field(r, i);
    PromptInput in;
    if (!p.is_tokens) {
      in.tokens = codec.raw_prompt(p.text, r.add_special_tokens);
      if (r.echo) in.echo = p.text;
    } else {
      for (auto id : p.tokens) {
        if (id >= vocab_size)
          return bad_field(field, field + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                      std::to_string(vocab_size) + ")");
        in.tokens.push_back(static_cast<model::Token>(id));
      }
      if (r.echo) in.echo = decoded(codec, in.tokens);
    }
    if (in.tokens.empty()) return bad_field(field, field + ": the prompt is empty");
    out.push_back(std::move(in));
  }
  return out;
}

}  // namespace

std::variant<std::vector<PromptInput>, ApiError> prompt_inputs(const CompletionRequest& r, const serving::TextCodec& codec,
                                                               std::uint32_t vocab_size, std::uint32_t max_model_len) {
  std::size_t keep = 0;
  if (r.truncate_prompt_tokens) {
    if (*r.truncate_prompt_tokens > static_cast<std::int64_t>(max_model_len))
      return bad_field("truncate_prompt_tokens", "truncate_prompt_tokens: " + std::to_string(*r.truncate_prompt_tokens) +
                                                     " is more than the context length (" + std::to_string(max_model_len) + ")");
    keep = *r.truncate_prompt_tokens < 0 ? max_model_len : static_cast<std::size_t>(*r.truncate_prompt_tokens);
  }
  auto inputs = tokenized(r, codec, vocab_size);
  if (auto* prompts = std::get_if<std::vector<PromptInput>>(&inputs); prompts && keep > 0)
    for (auto& in : *prompts) truncate(in, keep, r.echo, codec);
  return inputs;
}

std::optional<ApiError> check_token_ids(const CompletionRequest& r, std::uint32_t vocab_size) {
  const std::string range = " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")";
  for (std::size_t i = 0; i < r.stop_token_ids.size(); ++i)
    if (r.stop_token_ids[i] >= vocab_size)
      return bad_field("stop_token_ids", "stop_token_ids[" + std::to_string(i) + "]: token id " +
                                             std::to_string(r.stop_token_ids[i]) + range);
  for (const auto& [token, bias] : r.logit_bias)
    if (token >= vocab_size)
      return bad_field("logit_bias", "logit_bias: token id " + std::to_string(token) + range);
  return std::nullopt;
}

std::variant<std::uint32_t, ApiError> max_tokens_for(const CompletionRequest& r, std::uint32_t len,
                                                     std::uint32_t limit, const std::string& field) {
  if (len >= limit)
    return ApiError{400, field + ": the prompt has " + std::to_string(len) + " tokens; the context length is " +
                             std::to_string(limit), "invalid_request_error", field, "context_length_exceeded"};
  const std::uint32_t max_tokens = r.max_tokens.value_or(r.endpoint == Endpoint::chat ? limit - len : 16);
  if (len + max_tokens > limit)
    return ApiError{400, "max_tokens: the prompt (" + std::to_string(len) + " tokens) plus max_tokens (" +
                             std::to_string(max_tokens) + ") is more than the context length (" + std::to_string(limit) + ")",
                    "invalid_request_error", "max_tokens", "context_length_exceeded"};
  if (r.min_tokens > max_tokens)
    return bad_field("min_tokens", "min_tokens: must be at most max_tokens (" + std::to_string(max_tokens) + "), found " +
                                       std::to_string(r.min_tokens));
  return max_tokens;
}

scheduler::RequestSpec request_spec(const CompletionRequest& r, scheduler::RequestSpec spec, std::uint64_t seed) {
  spec.n = r.samples_per_prompt();
  spec.priority = r.priority;
  auto& s = spec.sampling;
  s.temperature = r.temperature;
  s.top_p = r.top_p;
  s.top_k = r.top_k;
  s.min_p = r.min_p;
  s.seed = seed;
  s.logprobs = r.logprobs;
  s.top_logprobs = r.top_logprobs;
  // echo with logprobs: the prompt's tokens too, with as many alternatives (OpenAI's legacy API).
  if (r.echo && r.logprobs) s.prompt_logprobs = static_cast<std::int32_t>(r.top_logprobs);
  // vLLM's prompt_logprobs: the same scores; the shard computes the larger of the two k.
  if (r.prompt_logprobs) s.prompt_logprobs = std::max(s.prompt_logprobs, static_cast<std::int32_t>(*r.prompt_logprobs));
  s.presence_penalty = r.presence_penalty;
  s.frequency_penalty = r.frequency_penalty;
  s.repetition_penalty = r.repetition_penalty;
  for (const auto& [token, bias] : r.logit_bias) s.logit_bias.push_back({static_cast<kv::TokenId>(token), bias});

  // Stops: the model's end tokens unless ignore_eos, and the request's own. The scheduler adds
  // the stop set to the min_tokens mask; what ignore_eos took out is masked too.
  spec.min_tokens = r.min_tokens;
  spec.ignore_eos = r.ignore_eos;
  if (r.ignore_eos) {
    if (r.min_tokens > 0) s.min_tokens_stop_ids = spec.stop_token_ids;
    spec.stop_token_ids.clear();
  }
  for (auto id : r.stop_token_ids)
    if (std::find(spec.stop_token_ids.begin(), spec.stop_token_ids.end(), id) == spec.stop_token_ids.end())
      spec.stop_token_ids.push_back(static_cast<kv::TokenId>(id));
  return spec;
}

}  // namespace actorlm::http
