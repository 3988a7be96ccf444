#pragma once
// Token counts of a response or, with stream_options.continuous_usage_stats, of one choice so far.

#include <cstdint>
#include <optional>

namespace actorlm::http {

struct Usage {
  std::uint64_t prompt_tokens = 0, completion_tokens = 0;
  // Of prompt_tokens, those the prefix cache served: written as OpenAI's
  // prompt_tokens_details.cached_tokens in a response's final usage (not per chunk).
  std::optional<std::uint64_t> cached_tokens;
};

}  // namespace actorlm::http
