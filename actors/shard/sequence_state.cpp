#include "actors/shard/sequence_state.hpp"

#include <stdexcept>
#include <string>

namespace actorlm::shard {

namespace {

[[noreturn]] void bad(kv::SeqId seq, const std::string& what) {
  throw std::invalid_argument("step for sequence " + std::to_string(seq) + ": " + what);
}

}  // namespace

const SequenceState::Sequence* SequenceState::find(kv::SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

const std::vector<const SequenceState::Sequence*>& SequenceState::apply(const Step& step) {
  for (kv::SeqId id : step.dropped) seqs_.erase(id);  // unknown ids: a step that never arrived
  for (const NewSeq& n : step.added) {
    if (n.prompt_len == 0 || n.prompt_len > n.tokens.size()) bad(n.seq, "prompt length out of range");
    Sequence& s = seqs_[n.seq];  // replaces a sequence dropped and added back in one step
    s.request = n.request;
    s.sample = n.sample;
    s.prompt_len = n.prompt_len;
    s.sampling = n.sampling;
    s.tokens = n.tokens;
    s.block_table.clear();
  }
  work_.clear();
  work_.reserve(step.seqs.size());
  for (const SeqWork& w : step.seqs) {
    if (w.padding) {
      work_.push_back(nullptr);
      continue;
    }
    auto it = seqs_.find(w.seq);
    if (it == seqs_.end()) bad(w.seq, "unknown sequence (never added, or dropped)");
    Sequence& s = it->second;
    if (w.appended >= 0) s.tokens.push_back(w.appended);
    if (w.table_first > s.block_table.size())
      bad(w.seq, "block table delta at " + std::to_string(w.table_first) + " past its end " +
                     std::to_string(s.block_table.size()));
    s.block_table.resize(w.table_first);
    s.block_table.insert(s.block_table.end(), w.table_blocks.begin(), w.table_blocks.end());
    if (w.begin >= w.end || w.end > s.tokens.size())
      bad(w.seq, "positions [" + std::to_string(w.begin) + ", " + std::to_string(w.end) + ") with " +
                     std::to_string(s.tokens.size()) + " tokens");
    if (std::uint64_t(s.block_table.size()) * step.block_size < w.end)
      bad(w.seq, "block table of " + std::to_string(s.block_table.size()) + " blocks does not cover position " +
                     std::to_string(w.end - 1));
    work_.push_back(&s);
  }
  return work_;
}

}  // namespace actorlm::shard
