#pragma once
// What a real backend's shard (cpu, cuda) takes from a Step besides its sequence state: the
// block copies and moves as the kernels' block pairs, and the forward's batch.

#include "actors/shard/prompt_logprobs.hpp"
#include "actors/shard/sequence_state.hpp"
#include "kernels/cpu/model/transformer.hpp"
#include "kernels/kv_cache_layout.hpp"

#include <vector>

namespace actorlm::shard {

// A Step's block copies or moves (kv::BlockCopy, kv::BlockMove) as block pairs.
template <class Move>
std::vector<kernels::BlockPair> block_pairs(const std::vector<Move>& moves) {
  std::vector<kernels::BlockPair> out;
  out.reserve(moves.size());
  for (const auto& m : moves) out.push_back({m.src, m.dst});
  return out;
}

// The forward's batch: each SeqWork's positions [begin, end) of its sequence's tokens, over its
// whole block table, with the last row's logits when it samples, and every row kept for its
// logits when it asks for prompt log-probabilities (wants_prompt_rows); padding rows left out. `work`
// as SequenceState::apply returned it for the step; the batch points into that state.
inline void forward_batch(const Step& step, const std::vector<const SequenceState::Sequence*>& work,
                          std::vector<kernels::cpu::ForwardSeq>& batch) {
  batch.clear();
  for (std::size_t i = 0; i < step.seqs.size(); ++i) {
    const SeqWork& w = step.seqs[i];
    if (w.padding) continue;  // dynamic batching's finished members
    const auto& s = *work[i];
    batch.push_back({std::span<const std::int32_t>(s.tokens.data() + w.begin, w.end - w.begin), w.begin,
                     std::span<const std::uint32_t>(s.block_table.data(), s.block_table.size()), w.num_samples > 0,
                     wants_prompt_rows(w, s)});
  }
}

}  // namespace actorlm::shard
