#include "actors/shard/logit_edits.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace actorlm::shard {

bool logit_edits(const SequenceState::Sequence& s, std::size_t vocab,
                 std::vector<kernels::cuda_math::LogitEdit>& out) {
  const SamplingParams& p = s.sampling;
  const std::size_t first = out.size();
  std::unordered_map<std::int32_t, std::size_t> at;  // token -> its edit in `out`
  const auto edit = [&](std::int32_t t) -> kernels::cuda_math::LogitEdit* {
    if (t < 0 || static_cast<std::size_t>(t) >= vocab) return nullptr;
    const auto [it, fresh] = at.try_emplace(t, out.size());
    if (fresh) out.push_back({t, 0, 0.0f, 1.0f, 0.0f});
    return &out[it->second];
  };
  for (const auto& b : p.logit_bias) {
    auto* e = edit(b.token);  // ids outside the vocabulary: ignored here as on the host
    if (e == nullptr) continue;
    if (e->flags & kernels::cuda_math::LogitEdit::biased) {
      out.resize(first);
      return false;
    }
    e->bias = b.bias;
    e->flags |= kernels::cuda_math::LogitEdit::biased;
  }
  if (p.masks_stop_ids(s.generated().size()))
    for (std::int32_t t : p.min_tokens_stop_ids)
      if (auto* e = edit(t)) e->flags |= kernels::cuda_math::LogitEdit::masked;
  if (p.repetition_penalty != 1.0f)
    for (std::int32_t t : s.tokens)
      if (auto* e = edit(t)) e->repetition = p.repetition_penalty;
  if (p.has_penalties()) {
    std::unordered_map<std::int32_t, std::uint32_t> counts;
    for (std::int32_t t : s.generated()) ++counts[t];
    for (const auto& [t, c] : counts)
      if (auto* e = edit(t)) e->subtract = p.presence_penalty + float(c) * p.frequency_penalty;
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
            [](const auto& a, const auto& b) { return a.token < b.token; });
  return true;
}

}  // namespace actorlm::shard
