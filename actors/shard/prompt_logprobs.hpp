#pragma once
// Prompt log-probabilities (SamplingParams::prompt_logprobs) from a forward's rows of logits, on
// the host: the row at position p scores the prompt's token p + 1 (log-softmax of the unchanged
// logits, with its top k, as kernels/cpu/sampling.hpp's score). Used by the cpu backend, whose
// forward gives every row of such a sequence's chunk (kernels::cpu::ForwardSeq::all_logits).
// Plain C++, no CAF.

#include "actors/shard/sequence_state.hpp"
#include "actors/shard/shard_messages.hpp"

#include <vector>

namespace actorlm::kernels::cpu { class ThreadPool; }

namespace actorlm::shard {

// Whether the work's forward needs all its rows: its sequence asks for prompt log-probabilities
// and the work computes a position whose next token is a prompt token.
inline bool wants_prompt_rows(const SeqWork& w, const SequenceState::Sequence& s) {
  return s.sampling.prompt_logprobs >= 0 && w.end > w.begin && w.begin + 1 < s.prompt_len;
}

// `logits`: [rows, vocab] as the forward wrote them for the step: per SeqWork in step order
// (padding left out), end - begin rows when wants_prompt_rows, else one row when it samples.
// Appends the prompt entries, in step and position order, to `out`, then compacts `logits` in
// place to one row per sampling SeqWork, as HostSampler takes them. Rows are scored on `pool`.
// Returns at once (nothing to do) when no SeqWork asks for them.
void take_prompt_logprobs(const Step& step, const std::vector<const SequenceState::Sequence*>& work,
                          std::vector<float>& logits, std::size_t vocab, kernels::cpu::ThreadPool* pool,
                          std::vector<PromptLogprob>& out);

}  // namespace actorlm::shard
