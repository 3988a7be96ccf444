#pragma once
// Prompt log-probabilities (SamplingParams::prompt_logprobs) from a forward's rows of logits, on
// the host: the row at position p scores the prompt's token p + 1 (log-softmax of the unchanged
// logits, with its top k, as kernels/cpu/sampling.hpp's score). Used by the cpu and cuda
// backends, whose forwards keep every row of such a sequence's chunk
// (kernels::cpu::ForwardSeq::all_logits) and project them a slice at a time (Transformer's and
// CudaTransformer's prompt_logits; the cuda one on the GPU, the scores here on the host).
// Plain C++, no CAF.

#include "actors/shard/sequence_state.hpp"
#include "actors/shard/shard_messages.hpp"

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace actorlm::kernels::cpu { class ThreadPool; }

namespace actorlm::shard {

// Whether the work's forward needs all its rows (scores_prompt for its sequence).
inline bool wants_prompt_rows(const SeqWork& w, const SequenceState::Sequence& s) {
  return scores_prompt(w, s.sampling.prompt_logprobs, s.prompt_len);
}

// The logits of `count` kept rows from `first`: out becomes [count, vocab].
using PromptRows = std::function<void(std::int64_t first, std::int64_t count, std::vector<float>& out)>;

// The kept rows: per SeqWork in step order (padding left out), end - begin rows when
// wants_prompt_rows, `kept` in all. Appends the prompt entries, in step and position order, to
// `out`. The rows are projected by `rows` `slice` at a time (prompt_rows_per_slice) and scored
// on `pool`: every slice of prompt_slices, even after a row failed to score or a slice to
// project (the first failure is rethrown once all are projected, so vocabulary-parallel ranks
// stay in step). Returns at once
// (nothing to do) when no SeqWork asks for them.
void take_prompt_logprobs(const Step& step, const std::vector<const SequenceState::Sequence*>& work,
                          std::int64_t kept, const PromptRows& rows, std::size_t vocab, std::int64_t slice,
                          kernels::cpu::ThreadPool* pool, std::vector<PromptLogprob>& out);

// The slices [first, first + count) of the kept rows that take_prompt_logprobs projects, in
// order (those holding a row that scores a prompt token): what the other ranks of a
// vocabulary-parallel group project in lockstep with the sampling rank, whose projection ends in
// an all-reduce.
std::vector<std::pair<std::int64_t, std::int64_t>> prompt_slices(const Step& step,
                                                                 const std::vector<const SequenceState::Sequence*>& work,
                                                                 std::int64_t kept, std::int64_t slice);

// Rows of a vocabulary of `vocab` that fit in 64 MiB of logits, at most 256 (at least 1): 256
// for SmolLM2's 49,152 tokens (48 MiB), 130 for Llama 3's 128,256.
std::int64_t prompt_rows_per_slice(std::size_t vocab);

}  // namespace actorlm::shard
