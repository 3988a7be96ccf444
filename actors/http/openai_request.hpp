#pragma once
// The body of POST /v1/completions and /v1/chat/completions, parsed and validated into a plain
// struct. Every field is checked for type and range; a bad one gives a 400 ApiError naming it.
// Unknown fields are refused (a misspelt parameter must not be silently ignored); null means
// absent, as in OpenAI's API.

#include "actors/http/api_error.hpp"
#include "model/tokenizer/chat_template.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace actorlm::http {

enum class Endpoint { completions, chat };

struct Prompt {
  std::string text;                  // a text prompt, or
  std::vector<std::int64_t> tokens;  // token ids (checked against the vocabulary later)
  bool is_tokens = false;
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;
  std::vector<Prompt> prompts;                 // completions: one or more
  std::vector<model::ChatMessage> messages;    // chat
  std::optional<std::uint32_t> max_tokens;     // absent: 16 (completions), the rest of the context (chat)
  float temperature = 1.0f;                    // [0, 2]; 0 is greedy
  float top_p = 1.0f;                          // (0, 1]
  std::int32_t top_k = 0;                      // 0 or -1: off
  float min_p = 0.0f;                          // [0, 1]
  std::uint32_t n = 1;                         // [1, 128]
  std::vector<std::string> stop;               // at most 16 strings, none empty
  std::optional<std::uint64_t> seed;
  bool logprobs = false;                       // completions: logprobs = K >= 0; chat: logprobs = true
  std::uint32_t top_logprobs = 0;              // completions: K in [0, 5]; chat: [0, 20]
  float presence_penalty = 0.0f;               // [-2, 2]
  float frequency_penalty = 0.0f;              // [-2, 2]
  std::string user;
  std::int32_t priority = 0;                   // extension: lower runs first
  bool stream = false;
  bool include_usage = false;                  // stream_options.include_usage
};

std::variant<CompletionRequest, ApiError> parse_request(Endpoint, std::string_view body);

}  // namespace actorlm::http
