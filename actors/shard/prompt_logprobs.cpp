#include "actors/shard/prompt_logprobs.hpp"

#include "kernels/cpu/sampling.hpp"
#include "kernels/cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <stdexcept>
#include <string>

namespace actorlm::shard {

std::int64_t prompt_rows_per_slice(std::size_t vocab) {
  constexpr std::size_t floats = std::size_t{1} << 24;  // 64 MiB of logits
  return static_cast<std::int64_t>(std::clamp<std::size_t>(floats / std::max<std::size_t>(vocab, 1), 1, 256));
}

namespace {

// Calls row_fn(row, i, p) for each kept row that scores a prompt token (row among the kept rows,
// i the SeqWork, p its position) and returns how many rows were kept; checks that against `kept`.
template <class F>
void for_each_scored_row(const Step& step, const std::vector<const SequenceState::Sequence*>& work,
                         std::int64_t kept, F row_fn) {
  std::int64_t row = 0;
  for (std::size_t i = 0; i < step.seqs.size(); ++i) {
    const SeqWork& w = step.seqs[i];
    if (w.padding || !wants_prompt_rows(w, *work[i])) continue;
    const auto& s = *work[i];
    for (std::uint32_t p = w.begin; p < w.end; ++p, ++row)
      if (p + 1 < s.prompt_len) row_fn(row, i, p);  // else it scores a generated token (a recomputed sequence)
  }
  if (row != kept)
    throw std::logic_error("take_prompt_logprobs: the forward kept " + std::to_string(kept) +
                           " prompt rows, the step's work has " + std::to_string(row));
}

// The slices of `slice` rows of [0, kept) that hold one of `rows` (ascending), in order.
std::vector<std::pair<std::int64_t, std::int64_t>> slices_of(const std::vector<std::int64_t>& rows, std::int64_t kept,
                                                             std::int64_t slice) {
  if (slice < 1) throw std::invalid_argument("take_prompt_logprobs: slice " + std::to_string(slice));
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const std::int64_t r : rows) {
    const std::int64_t first = r / slice * slice;
    if (out.empty() || out.back().first != first) out.emplace_back(first, std::min(slice, kept - first));
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::int64_t, std::int64_t>> prompt_slices(const Step& step,
                                                                 const std::vector<const SequenceState::Sequence*>& work,
                                                                 std::int64_t kept, std::int64_t slice) {
  std::vector<std::int64_t> rows;
  for_each_scored_row(step, work, kept, [&](std::int64_t row, std::size_t, std::uint32_t) { rows.push_back(row); });
  return slices_of(rows, kept, slice);
}

void take_prompt_logprobs(const Step& step, const std::vector<const SequenceState::Sequence*>& work,
                          std::int64_t kept, const PromptRows& rows, std::size_t vocab, std::int64_t slice,
                          kernels::cpu::ThreadPool* pool, std::vector<PromptLogprob>& out) {
  if (slice < 1) throw std::invalid_argument("take_prompt_logprobs: slice " + std::to_string(slice));
  bool any = false;
  for (std::size_t i = 0; i < step.seqs.size() && !any; ++i)
    any = !step.seqs[i].padding && wants_prompt_rows(step.seqs[i], *work[i]);
  if (!any) return;  // every decode step
  struct Job {
    std::int64_t row;   // among the kept rows
    std::size_t entry;  // in `out`
    std::uint32_t top;  // how many alternatives
  };
  std::vector<Job> jobs;
  std::vector<std::int64_t> job_rows;
  const std::size_t first_entry = out.size();
  for_each_scored_row(step, work, kept, [&](std::int64_t row, std::size_t i, std::uint32_t p) {
    const auto& s = *work[i];
    jobs.push_back({row, out.size(), static_cast<std::uint32_t>(s.sampling.prompt_logprobs)});
    job_rows.push_back(row);
    out.push_back({step.seqs[i].seq, p + 1, s.tokens[p + 1], 0, {}, 0});
  });

  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  std::vector<float> logits;  // one slice's rows
  std::size_t next = 0;  // the first job of the slice
  try {
    for (const auto& [first, count] : slices_of(job_rows, kept, slice)) {
      std::size_t end = next;
      while (end < jobs.size() && jobs[end].row < first + count) ++end;
      try {
        rows(first, count, logits);
      } catch (...) {  // the later slices are still projected (see the header), not scored
        if (!failed.exchange(true)) failure = std::current_exception();
        next = end;
        continue;
      }
      const auto run = [&](std::int64_t begin, std::int64_t stop) {
        for (std::int64_t k = begin; k < stop; ++k) {
          try {
            const Job& job = jobs[next + static_cast<std::size_t>(k)];
            PromptLogprob& e = out[job.entry];
            const auto at = static_cast<std::size_t>(job.row - first) * vocab;
            const auto scored = kernels::cpu::score(std::span<const float>(logits).subspan(at, vocab), e.token, job.top);
            e.logprob = scored.logprob;
            e.rank = scored.rank;
            e.top.reserve(scored.top.size());
            for (const auto& t : scored.top) e.top.push_back({t.token, t.logprob});
          } catch (...) {  // the pool's functions must not throw: the first failure is rethrown below
            if (!failed.exchange(true)) failure = std::current_exception();
            return;
          }
        }
      };
      const auto n = static_cast<std::int64_t>(end - next);
      if (!failure) {  // after a failure the slices are still projected, not scored
        if (n < 2 || pool == nullptr || pool->size() == 1) run(0, n);
        else pool->parallel_for(n, 1, run);
      }
      next = end;
    }
  } catch (...) {
    out.resize(first_entry);
    throw;
  }
  if (failure) {
    out.resize(first_entry);
    std::rethrow_exception(failure);
  }
}

}  // namespace actorlm::shard
