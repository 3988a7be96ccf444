#pragma once
// best_of (vLLM's, from OpenAI's legacy completions): best_of samples per prompt are generated
// and the n with the highest cumulative log-probability returned, best first (ties: the lower
// sample first, as Python's stable sort gives vLLM). Non-streamed only, so the samples are
// gathered whole and a prompt's choices released together once all its samples are done.

#include "actors/http/choice_delta.hpp"

#include <cstdint>
#include <vector>

namespace actorlm::http {

class BestOfSelector {
 public:
  BestOfSelector(std::uint32_t prompts, std::uint32_t n, std::uint32_t best_of);

  // Folds in a delta of sample d.index (= prompt * best_of + sample) whose sample has now
  // `tokens` tokens of cumulative log-probability `cumulative_logprob`. Once the prompt's last
  // sample has finished (a delta with a finish reason), returns its n best samples as whole
  // choices of index prompt * n + rank; otherwise nothing.
  std::vector<ChoiceDelta> add(const ChoiceDelta& d, double cumulative_logprob, std::uint32_t tokens);

  // Tokens of the choices released so far (vLLM's usage counts the returned outputs only).
  std::uint64_t returned_tokens() const { return returned_tokens_; }

 private:
  struct Sample {
    ChoiceDelta whole;
    double cumulative_logprob = 0;
    std::uint32_t tokens = 0;
    bool done = false;
  };
  std::uint32_t n_, best_of_;
  std::vector<Sample> samples_;  // [prompts * best_of]
  std::uint64_t returned_tokens_ = 0;
};

}  // namespace actorlm::http
