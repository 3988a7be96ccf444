#pragma once
// vLLM's POST /tokenize and POST /detokenize (beside the OpenAI API; clients use them to count a
// prompt's tokens against max_model_len before sending it, and load tools to build prompts of a
// length):
//   /tokenize {"prompt": "..."} or {"messages": [...]} -> {"count", "max_model_len", "tokens",
//             "token_strs"}. The prompt becomes tokens exactly as /v1/completions (with
//             add_special_tokens, default true) or /v1/chat/completions (the chat template, with
//             add_generation_prompt, continue_final_message, chat_template_kwargs and
//             add_special_tokens, default false) would make it. "return_token_strs": true lists
//             each token as the vocabulary spells it (HF's convert_ids_to_tokens, as vLLM);
//             otherwise token_strs is null.
//   /detokenize {"tokens": [...]} -> {"prompt": "..."}: the ids' text with special tokens
//             written out (HF's decode), invalid UTF-8 replaced by U+FFFD.
// "model" may be left out, as on the other endpoints, and a field given as null is absent. Any
// other field is a 400 naming it, and so is an id outside the vocabulary.

#include "actors/http/api_error.hpp"
#include "actors/serving/text_codec.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace actorlm::http {

struct TokenizeContext {
  const serving::TextCodec& codec;
  std::uint32_t vocab_size = 0;
  std::uint32_t max_model_len = 0;
  std::string_view served_name;  // what "model" must name (or the response name)
  std::string_view response_name;
};

// The answer's JSON body, or the error to send.
std::variant<std::string, ApiError> tokenize_json(std::string_view body, const TokenizeContext&);
std::variant<std::string, ApiError> detokenize_json(std::string_view body, const TokenizeContext&);

}  // namespace actorlm::http
