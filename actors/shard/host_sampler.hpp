#pragma once
// A step's next tokens from its rows of logits, on the host: each row changed by its sequence's
// sampling parameters (logit bias, min_tokens' mask, penalties: SamplingParams' order), then
// drawn by kernels/cpu/sampling.hpp with the sequence's counter-based seed. Shared by the cpu
// backend and the cuda backend (which copies its logits back for it). Plain C++, no CAF.

#include "actors/shard/sequence_state.hpp"
#include "actors/shard/shard_messages.hpp"

#include <span>
#include <vector>

namespace actorlm::kernels::cpu { class ThreadPool; }

namespace actorlm::shard {

class HostSampler {
 public:
  // `logits`: [rows, vocab], one row per SeqWork of `step` with num_samples > 0, in step order;
  // `work` as SequenceState::apply returned it for the step. `out` gets num_samples tokens per
  // such SeqWork, in order. Rows go to `pool` when it has more than one thread (a row's draw
  // depends only on the row, its parameters and its seed: the same bits in any split).
  // Throws what the sampler throws (std::invalid_argument for a row it cannot sample).
  void sample(const Step& step, const std::vector<const SequenceState::Sequence*>& work,
              std::span<const float> logits, std::size_t vocab, kernels::cpu::ThreadPool* pool,
              std::vector<SampledToken>& out);

  // Rows of logits a step samples from: its SeqWorks with num_samples > 0, padding excluded.
  static std::size_t rows(const Step& step);

  // One row: w.num_samples tokens of sequence `s` from `logits` ([vocab]) into out[0, num_samples).
  // `scratch` holds the row changed by the sequence's parameters when they change it.
  static void sample_row(const SeqWork& w, const SequenceState::Sequence& s, std::span<const float> logits,
                         SampledToken* out, std::vector<float>& scratch);

  // SamplingParams' changes to sequence s's row of logits ([vocab]), in place, in its order
  // (vLLM's: logit bias and min_tokens' mask, then the repetition, presence and frequency
  // penalties). sample_row calls it when s.sampling.changes_logits.
  static void process_row(const SequenceState::Sequence& s, std::span<float> row);


 private:
  struct RowJob {
    std::size_t seq;    // index into step.seqs
    std::size_t first;  // its first entry in the result's tokens
  };
  std::vector<RowJob> rows_;
};

}  // namespace actorlm::shard
