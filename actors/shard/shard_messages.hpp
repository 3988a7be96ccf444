#pragma once
// The shard protocol's messages, the same for every backend (sim, cpu, cuda): one Step per
// scheduler iteration goes to every tensor-parallel rank; rank 0 answers with a StepResult.
// Steps are incremental (vLLM v1's SchedulerOutput): a sequence's prompt goes to the shards
// once, then each step carries its new token, its block-table delta and the positions to
// compute; a decode step of 256 sequences is a few kilobytes however long they are.
// Plain structs (no CAF include); the shard protocol header adds inspect().

#include "actors/kv/kv_types.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace actorlm::shard {

using RequestId = std::uint64_t;

struct LogitBias {
  kv::TokenId token = 0;
  float bias = 0;  // [-100, 100], added to the token's logit
};

// How a sample's next token is drawn. Before the draw, a shard changes the row of logits in
// vLLM's order: logit_bias added, min_tokens' stop ids masked, then the repetition, presence
// and frequency penalties (kernels/cpu/sampling.hpp); reported log-probabilities are those of
// the changed row.
// The most alternatives a token's log-probability comes with (top_logprobs, prompt_logprobs).
inline constexpr std::uint32_t max_top_logprobs = 20;

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
  float repetition_penalty = 1.0f; // > 0; divides (x > 0) or multiplies (x <= 0) the logits of
                                   // tokens in the prompt or the output (HF's, vLLM's)
  std::vector<LogitBias> logit_bias;
  std::int32_t prompt_logprobs = -1;  // >= 0: the log-probability of every prompt token after the
                                      // first, given those before it, with its top k (from the
                                      // unchanged logits, as vLLM's); -1: none
  std::uint32_t min_tokens = 0;    // while fewer tokens are generated, min_tokens_stop_ids are
  std::vector<kv::TokenId> min_tokens_stop_ids;  // masked: the sample cannot end (the scheduler
                                                 // fills them in from the request's stop ids)
  bool has_penalties() const { return presence_penalty != 0.0f || frequency_penalty != 0.0f; }
  // Whether the row of logits changes before the draw of a sample that has `generated` tokens.
  bool changes_logits(std::size_t generated) const {
    return has_penalties() || repetition_penalty != 1.0f || !logit_bias.empty() || masks_stop_ids(generated);
  }
  bool masks_stop_ids(std::size_t generated) const {
    return generated < min_tokens && !min_tokens_stop_ids.empty();
  }
};

// A sequence the shards have not seen: first scheduled, resumed after preemption (recompute
// or swap), or a fork of another sample. Its tokens travel once, here; every rank keeps them
// (actors/shard/sequence_state.hpp) and later steps send only what changed.
struct NewSeq {
  kv::SeqId seq = 0;
  RequestId request = 0;
  std::uint32_t sample = 0;            // which of the request's n samples this sequence is
  std::uint32_t prompt_len = 0;        // tokens[0, prompt_len) are the prompt
  std::vector<kv::TokenId> tokens;     // [prompt_len + generated]: the prompt, then its samples so far
  SamplingParams sampling;
};

// One sequence's work in a step: the delta against what the shards hold.
// Slot of position p: table[p / block_size] * block_size + p % block_size.
struct SeqWork {
  kv::SeqId seq = 0;
  kv::TokenId appended = -1;           // >= 0: the token the last step sampled for it, appended first
  std::uint32_t begin = 0;             // computes positions [begin, end): the prefix [0, begin) is
  std::uint32_t end = 0;               // in the KV cache already (the computed-token count)
  std::uint32_t table_first = 0;       // block table delta: table[table_first:] = table_blocks
  std::vector<kv::BlockId> table_blocks;  // (table_first = the table's size and nothing: unchanged)
  std::uint32_t num_samples = 0;       // tokens to sample from position end - 1's logits
                                       // (0: a prefill chunk that does not end the prompt;
                                       // n > 1: the first tokens of n parallel samples)
  bool padding = false;                // dynamic batching: a finished member kept in the padded
                                       // batch; costs compute, writes and samples nothing, and
                                       // needs no state on the shards (only `end`: its length)
};

// Whether `w` scores prompt tokens for a sequence whose sampling asks `prompt_logprobs` (>= 0)
// and whose prompt is `prompt_len` tokens: it computes a position whose next token is the
// prompt's (position p scores token p + 1).
inline bool scores_prompt(const SeqWork& w, std::int32_t prompt_logprobs, std::uint32_t prompt_len) {
  return prompt_logprobs >= 0 && w.end > w.begin && w.begin + 1 < prompt_len;
}

// Applied in this order: dropped, added, swap_out, swap_in, copies, then the seqs' forward.
struct Step {
  std::uint64_t id = 0;
  std::uint32_t block_size = 0;
  std::vector<kv::SeqId> dropped;       // finished, aborted or preempted: shards forget them
  std::vector<NewSeq> added;
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

// A prompt token's log-probability given the prompt before it (SamplingParams::prompt_logprobs).
struct PromptLogprob {
  kv::SeqId seq = 0;
  std::uint32_t position = 0;  // of the token in the prompt, >= 1
  kv::TokenId token = 0;
  float logprob = 0;
  std::vector<TopLogprob> top;  // prompt_logprobs entries, most likely first
  std::uint32_t rank = 0;       // 1 + the tokens more likely than `token` (vLLM's rank)
};

struct StepResult {
  std::uint64_t step_id = 0;
  std::vector<SampledToken> tokens;  // per SeqWork with num_samples > 0, num_samples entries in order
  std::vector<PromptLogprob> prompt_logprobs;  // for the prompt positions the step computed of
                                               // sequences that ask for them, in step order
  std::int64_t duration_ns = 0;      // measured (cpu, cuda) or modelled (sim)
  std::int64_t host_ns = 0;          // of duration_ns, the time the shard's thread worked rather than
                                     // waited for its device (cuda: all but the stream
                                     // synchronisations; cpu: all of it; sim: 0)
};

}  // namespace actorlm::shard
