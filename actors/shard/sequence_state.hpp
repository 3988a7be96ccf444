#pragma once
// What one shard rank knows of the sequences it runs, kept up to date from incremental steps
// (vLLM v1's idea): a sequence's tokens arrive once, in Step::added, when it is first scheduled
// (or resumes after preemption, or is a fork); later steps carry only its newly sampled token,
// the changed tail of its block table and the positions to compute; Step::dropped names the
// sequences to forget (finished, aborted, preempted). Every rank applies every step, so every
// rank holds the same state. Plain C++, no CAF.

#include "actors/shard/shard_messages.hpp"

#include <span>
#include <unordered_map>
#include <vector>

namespace actorlm::shard {

class SequenceState {
 public:
  struct Sequence {
    RequestId request = 0;
    std::uint32_t sample = 0;
    std::uint32_t prompt_len = 0;
    SamplingParams sampling;
    std::vector<kv::TokenId> tokens;      // [prompt_len + generated]: the prompt, then the samples
    std::vector<kv::BlockId> block_table; // slot of position p: table[p / block_size] * block_size + p % block_size

    std::span<const kv::TokenId> generated() const {
      return {tokens.data() + prompt_len, tokens.size() - prompt_len};
    }
  };

  // Applies the step's drops, then its additions, then each SeqWork's appended token and table
  // delta. Returns, for each of step.seqs in order, its sequence (nullptr for padding rows).
  // Throws std::invalid_argument, naming the sequence, for a step that does not fit what this
  // rank holds (an unknown sequence, a table delta past the table's end, positions past the
  // tokens or not covered by the table); the state is then unspecified for the step's sequences.
  const std::vector<const Sequence*>& apply(const Step& step);

  const Sequence* find(kv::SeqId id) const;
  std::size_t size() const { return seqs_.size(); }

 private:
  std::unordered_map<kv::SeqId, Sequence> seqs_;
  std::vector<const Sequence*> work_;
};

}  // namespace actorlm::shard
