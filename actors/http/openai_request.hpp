#pragma once
// The body of POST /v1/completions and /v1/chat/completions, parsed and validated into a plain
// struct. Every field is checked for type and range; a bad one gives a 400 ApiError naming it.
// Unknown fields are refused (a misspelt parameter must not be silently ignored); null means
// absent, as in OpenAI's API. Besides OpenAI's fields, vLLM's extensions that clients and load
// tools send to any OpenAI-compatible server are taken, with vLLM's meaning and defaults
// (vllm/entrypoints/openai/protocol.py, vllm/sampling_params.py).

#include "actors/http/api_error.hpp"
#include "model/tokenizer/chat_template.hpp"

#include <nlohmann/json_fwd.hpp>

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
  bool continuous_usage_stats = false;         // stream_options.continuous_usage_stats (vLLM): usage
                                               // on every chunk; implies include_usage unless it is
                                               // given (vLLM's include_usage defaults to true)

  // vLLM's extensions (both endpoints unless said).
  bool ignore_eos = false;                     // the model's end-of-text/turn tokens do not stop
  std::uint32_t min_tokens = 0;                // no stop (token or string) before this many tokens
  std::vector<std::int64_t> stop_token_ids;    // stop too (checked against the vocabulary later)
  bool include_stop_str_in_output = false;     // the stop string or stop token's text is kept
  bool skip_special_tokens = true;             // special tokens produce no text
  bool spaces_between_special_tokens = true;   // accepted; no effect (see text_codec.hpp)
  float repetition_penalty = 1.0f;             // (0, 1e6], HF's (prompt and output tokens)
  bool return_tokens_as_token_ids = false;     // logprobs' tokens written "token_id:{id}"
  bool add_special_tokens = true;              // BOS added to the prompt; default true for
                                               // completions, false for chat (the template has it)
  std::vector<std::pair<std::int64_t, float>> logit_bias;  // token id -> bias in [-100, 100]
  std::optional<std::uint32_t> best_of;        // >= n samples per prompt, the n of highest
                                               // cumulative logprob returned; not when streaming
  bool echo = false;                           // completions: the prompt in front of the text
  std::optional<std::int64_t> truncate_prompt_tokens;  // only the prompt's last k tokens are used
                                               // (vLLM's left truncation); -1: the context length
  std::optional<std::uint32_t> prompt_logprobs;  // vLLM's: each prompt token's log-probability,
                                               // rank and k alternatives, k in [0, 20]; not streamed
  bool add_generation_prompt = true;           // chat: the assistant's turn opened
  bool continue_final_message = false;         // chat: the last message continued (no new turn)

  // Engine samples per prompt: best_of when given, else n.
  std::uint32_t samples_per_prompt() const { return best_of.value_or(n); }
};

// `served_model`: the name that a request without "model" gets (vLLM and llama.cpp let clients
// leave it out); empty: "model" is required.
std::variant<CompletionRequest, ApiError> parse_request(Endpoint, std::string_view body,
                                                        std::string_view served_model = {});
// The same, from a document read_json_body gave (a caller that looks at the body first).
std::variant<CompletionRequest, ApiError> parse_request_document(Endpoint, const nlohmann::json& body,
                                                                 std::string_view served_model = {});

// A request body as a JSON document, refused as every endpoint refuses one: check_json_body's
// 400s (bad UTF-8, depth, numbers, duplicate keys), then a syntax error's 400 "invalid_json".
std::variant<nlohmann::json, ApiError> read_json_body(std::string_view body);

// The 404 for a "model" other than the served one (`also`: another name the server answers to).
std::optional<ApiError> model_not_served(std::string_view asked, std::string_view served, std::string_view also = {});

}  // namespace actorlm::http
