#pragma once
// Token counts of a response or, with stream_options.continuous_usage_stats, of one choice so far.

#include <cstdint>

namespace actorlm::http {

struct Usage {
  std::uint64_t prompt_tokens = 0, completion_tokens = 0;
};

}  // namespace actorlm::http
