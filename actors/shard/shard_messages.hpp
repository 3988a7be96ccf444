#pragma once
// The shard protocol's messages, the same for every backend (sim, cpu, cuda): one Step per
// scheduler iteration goes to every tensor-parallel rank; rank 0 answers with a StepResult.
// Plain structs (no CAF include); the shard protocol header adds inspect().

#include "actors/kv/kv_types.hpp"

#include <cstdint>
#include <vector>

namespace actorlm::shard {

using RequestId = std::uint64_t;

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;
  std::int32_t top_k = 0;    // 0: off
  float min_p = 0.0f;
  std::uint64_t seed = 0;    // with (sample, position): reproducible draws
  bool logprobs = false;
  std::uint32_t top_logprobs = 0;
  float presence_penalty = 0.0f;   // [-2, 2], subtracted once from every generated token's logit
  float frequency_penalty = 0.0f;  // [-2, 2], subtracted per occurrence (OpenAI's definition)
  bool has_penalties() const { return presence_penalty != 0.0f || frequency_penalty != 0.0f; }
};

// One sequence's work in a step.
// Slot of position p: block_table[p / block_size] * block_size + p % block_size.
struct SeqWork {
  kv::SeqId seq = 0;
  RequestId request = 0;
  std::uint32_t sample = 0;             // which of the request's n samples this sequence is
  std::vector<kv::TokenId> tokens;      // [n_tokens]: a prefill chunk, or the last sampled token
  std::uint32_t first_position = 0;     // position of tokens[0]; the rest follow
  std::vector<kv::BlockId> block_table; // covers positions [0, first_position + n_tokens)
  std::uint32_t num_samples = 0;        // tokens to sample from the last position's logits
                                        // (0: a prefill chunk that does not end the prompt;
                                        // n > 1: the first tokens of n parallel samples)
  bool padding = false;                 // dynamic batching: a finished member kept in the
                                        // padded batch; costs compute, writes and samples nothing
  SamplingParams sampling;
  std::vector<kv::TokenId> output_tokens;  // this sample's generated tokens so far: sent only
                                           // when it samples and its sampling has penalties
};

struct Step {
  std::uint64_t id = 0;
  std::uint32_t block_size = 0;
  std::vector<SeqWork> seqs;
  std::vector<kv::BlockCopy> copies;    // before attention
  std::vector<kv::BlockMove> swap_out;  // before swap_in
  std::vector<kv::BlockMove> swap_in;
};

struct TopLogprob {
  kv::TokenId token = 0;
  float logprob = 0;
};

struct SampledToken {
  kv::SeqId seq = 0;
  kv::TokenId token = 0;
  float logprob = 0;
  std::vector<TopLogprob> top;  // when asked
};

struct StepResult {
  std::uint64_t step_id = 0;
  std::vector<SampledToken> tokens;  // per SeqWork with num_samples > 0, num_samples entries in order
  std::int64_t duration_ns = 0;      // measured (cpu, cuda) or modelled (sim)
};

}  // namespace actorlm::shard
