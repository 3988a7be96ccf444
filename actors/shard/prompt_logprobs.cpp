#include "actors/shard/prompt_logprobs.hpp"

#include "kernels/cpu/sampling.hpp"
#include "kernels/cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

namespace actorlm::shard {

void take_prompt_logprobs(const Step& step, const std::vector<const SequenceState::Sequence*>& work,
                          std::vector<float>& logits, std::size_t vocab, kernels::cpu::ThreadPool* pool,
                          std::vector<PromptLogprob>& out) {
  const auto asks = [&](std::size_t i) { return !step.seqs[i].padding && wants_prompt_rows(step.seqs[i], *work[i]); };
  bool any = false;
  for (std::size_t i = 0; i < step.seqs.size() && !any; ++i) any = asks(i);
  if (!any) return;  // the rows are the sampler's already (every decode step)
  // First the entries and the rows they read; then the rows the sampler takes, moved down.
  struct Job {
    std::size_t row;   // in `logits` as written
    std::size_t entry; // in `out`
    std::uint32_t top; // how many alternatives
  };
  std::vector<Job> jobs;
  std::vector<std::size_t> kept;  // the sampling rows, in order
  const std::size_t first_entry = out.size();
  std::size_t row = 0;
  for (std::size_t i = 0; i < step.seqs.size(); ++i) {
    const SeqWork& w = step.seqs[i];
    if (w.padding) continue;
    const auto& s = *work[i];
    if (!asks(i)) {
      if (w.num_samples > 0) kept.push_back(row++);
      continue;
    }
    for (std::uint32_t p = w.begin; p < w.end; ++p, ++row) {
      if (p + 1 >= s.prompt_len) continue;  // scores a generated token (a recomputed sequence)
      jobs.push_back({row, out.size(), static_cast<std::uint32_t>(s.sampling.prompt_logprobs)});
      out.push_back({w.seq, p + 1, s.tokens[p + 1], 0, {}});
    }
    if (w.num_samples > 0) kept.push_back(row - 1);
  }
  if (row * vocab != logits.size())
    throw std::logic_error("take_prompt_logprobs: the forward gave " + std::to_string(logits.size() / vocab) +
                           " rows of logits, the step's work " + std::to_string(row));

  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  const auto run = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t k = begin; k < end; ++k) {
      try {
        const Job& job = jobs[static_cast<std::size_t>(k)];
        PromptLogprob& e = out[job.entry];
        const auto scored = kernels::cpu::score(std::span<const float>(logits).subspan(job.row * vocab, vocab), e.token, job.top);
        e.logprob = scored.logprob;
        e.top.reserve(scored.top.size());
        for (const auto& t : scored.top) e.top.push_back({t.token, t.logprob});
      } catch (...) {  // the pool's functions must not throw: the first failure is rethrown below
        if (!failed.exchange(true)) failure = std::current_exception();
        return;
      }
    }
  };
  if (jobs.size() < 2 || pool == nullptr || pool->size() == 1) run(0, static_cast<std::int64_t>(jobs.size()));
  else pool->parallel_for(static_cast<std::int64_t>(jobs.size()), 1, run);
  if (failure) {
    out.resize(first_entry);
    std::rethrow_exception(failure);
  }

  for (std::size_t k = 0; k < kept.size(); ++k)
    if (kept[k] != k) std::memmove(logits.data() + k * vocab, logits.data() + kept[k] * vocab, vocab * sizeof(float));
  logits.resize(kept.size() * vocab);
}

}  // namespace actorlm::shard
