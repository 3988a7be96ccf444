#pragma once
// From an accepted API request to what the engine runs: each prompt as token ids (the chat
// template or the raw text, with the request's template and special-token switches), checked
// against the vocabulary and the context length, and each prompt's engine request
// (scheduler::RequestSpec) with the request's sampling, stop and min_tokens settings.
// Plain functions: CompletionSession::start() calls them in this order.

#include "actors/http/api_error.hpp"
#include "actors/http/openai_request.hpp"
#include "actors/scheduler/request.hpp"
#include "actors/serving/text_codec.hpp"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace actorlm::http {

// One prompt's tokens, and the text echo shows for it (completions with "echo").
struct PromptInput {
  std::vector<model::Token> tokens;
  std::string echo;
};

// The prompts, tokenized; a token-id prompt outside the vocabulary, or an empty one, is a 400
// naming the prompt. The echo text is the prompt as given, or a token-id prompt decoded with its
// special tokens written out (as HF's decode does by default). With truncate_prompt_tokens k
// (-1: max_model_len), a longer prompt keeps its last k tokens and echo shows those decoded;
// a k over max_model_len is a 400 naming the field.
std::variant<std::vector<PromptInput>, ApiError> prompt_inputs(const CompletionRequest&, const serving::TextCodec&,
                                                               std::uint32_t vocab_size, std::uint32_t max_model_len);

// stop_token_ids and logit_bias name tokens of the vocabulary: a 400 naming the field otherwise.
std::optional<ApiError> check_token_ids(const CompletionRequest&, std::uint32_t vocab_size);

// max_tokens for one prompt of `prompt_len` tokens: the request's, else 16 (completions) or the
// rest of the context (chat). A 400 when the prompt, or the prompt plus max_tokens, exceeds the
// context, or min_tokens exceeds max_tokens. `field` names the prompt ("prompt[1]", "messages").
std::variant<std::uint32_t, ApiError> max_tokens_for(const CompletionRequest&, std::uint32_t prompt_len,
                                                     std::uint32_t max_model_len, const std::string& field);

// The engine request of one prompt. `base` is ServedModel::request()'s (id, prompt, max_tokens,
// the model's end-of-text and end-of-turn tokens as stop tokens); `seed` the call's seed plus
// the prompt's index. ignore_eos drops the model's stop tokens from the stop set but keeps them
// masked until min_tokens (vLLM masks its EOS ids then whatever ignore_eos says).
scheduler::RequestSpec request_spec(const CompletionRequest&, scheduler::RequestSpec base, std::uint64_t seed);

}  // namespace actorlm::http
