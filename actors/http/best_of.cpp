#include "actors/http/best_of.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace actorlm::http {

BestOfSelector::BestOfSelector(std::uint32_t prompts, std::uint32_t n, std::uint32_t best_of)
    : n_(n), best_of_(best_of), samples_(std::size_t(prompts) * best_of) {
  if (n == 0 || best_of < n) throw std::invalid_argument("BestOfSelector: needs 1 <= n <= best_of");
}

std::vector<ChoiceDelta> BestOfSelector::add(const ChoiceDelta& d, double cumulative_logprob, std::uint32_t tokens) {
  if (d.index >= samples_.size()) throw std::out_of_range("BestOfSelector: sample " + std::to_string(d.index));
  Sample& s = samples_[d.index];
  s.whole.text += d.text;
  s.whole.logprobs.insert(s.whole.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
  s.cumulative_logprob = cumulative_logprob;
  s.tokens = tokens;
  if (!d.finish_reason || s.done) return {};
  s.whole.finish_reason = d.finish_reason;
  s.done = true;

  const std::uint32_t prompt = d.index / best_of_;
  const auto first = samples_.begin() + std::ptrdiff_t(prompt) * best_of_;
  if (!std::all_of(first, first + best_of_, [](const Sample& x) { return x.done; })) return {};
  std::vector<std::uint32_t> order(best_of_);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return first[a].cumulative_logprob > first[b].cumulative_logprob;
  });
  std::vector<ChoiceDelta> out;
  for (std::uint32_t rank = 0; rank < n_; ++rank) {
    Sample& best = first[order[rank]];
    ChoiceDelta c = std::move(best.whole);
    c.index = prompt * n_ + rank;
    returned_tokens_ += best.tokens;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace actorlm::http
