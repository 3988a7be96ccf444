#pragma once
// What a completion session hands the server for one choice at a time: the new text, the
// logprobs of the tokens it completes, the finish reason on its last delta and, with
// stream_options.continuous_usage_stats, the choice's usage so far.

#include "actors/http/usage.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorlm::http {

struct TokenLogprob {
  std::string token;                                   // the token's text (bytes), or "token_id:{id}"
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;      // most likely tokens at this position
  bool unconditioned = false;                          // a prompt's first token (echo): no logprob
                                                       // (written null), nothing before it
};

// One prompt token as vLLM's prompt_logprobs give it (the prompt's first token has none): its
// log-probability and rank (1 + the tokens more likely), and the k most likely tokens there.
struct PromptTokenScore {
  struct Alternative {
    std::int32_t token = 0;
    std::string text;
    float logprob = 0;
  };
  std::int32_t token = 0;
  std::string text;  // the token's text (decoded_token)
  float logprob = 0;
  std::uint32_t rank = 0;
  std::vector<Alternative> top;  // most likely first (rank 1, 2, ...)
};

// What one pump of the session produced for one choice.
struct ChoiceDelta {
  std::uint32_t index = 0;
  std::string text;
  std::vector<TokenLogprob> logprobs;                  // tokens completed by this piece
  std::optional<std::string> finish_reason;            // "stop" | "length" on its last delta
  std::optional<Usage> usage;                          // continuous_usage_stats: this choice's prompt
                                                       // and its tokens so far
};

}  // namespace actorlm::http
