#include "actors/shard/host_sampler.hpp"

#include "kernels/cpu/sampling.hpp"
#include "kernels/cpu/thread_pool.hpp"

#include <atomic>
#include <exception>

namespace actorlm::shard {

namespace {

kernels::cpu::SamplerParams sampler_params(const SamplingParams& s) {
  kernels::cpu::SamplerParams p;
  p.temperature = s.temperature;
  p.top_p = s.top_p;
  p.top_k = s.top_k;
  p.min_p = s.min_p;
  p.seed = s.seed;
  p.top_logprobs = s.logprobs ? s.top_logprobs : 0;
  return p;
}

}  // namespace

void HostSampler::process_row(const SequenceState::Sequence& s, std::span<float> row) {
  namespace k = kernels::cpu;
  const SamplingParams& p = s.sampling;
  if (!p.logit_bias.empty()) {
    std::vector<k::TokenBias> bias;
    bias.reserve(p.logit_bias.size());
    for (const auto& b : p.logit_bias) bias.push_back({b.token, b.bias});
    k::apply_logit_bias(row, bias);
  }
  if (p.masks_stop_ids(s.generated().size())) k::mask_tokens(row, p.min_tokens_stop_ids);
  k::apply_repetition_penalty(row, s.tokens, p.repetition_penalty);
  if (p.has_penalties()) k::apply_penalties(row, s.generated(), p.presence_penalty, p.frequency_penalty);
}

void HostSampler::sample_row(const SeqWork& w, const SequenceState::Sequence& s, std::span<const float> logits,
                             SampledToken* out, std::vector<float>& scratch) {
  if (s.sampling.changes_logits(s.generated().size())) {
    // The changed row: the draw and the reported log-probabilities both use it.
    scratch.assign(logits.begin(), logits.end());
    process_row(s, scratch);
    logits = scratch;
  }
  const auto params = sampler_params(s.sampling);
  const std::uint64_t position = w.end;  // of the token drawn
  for (std::uint32_t j = 0; j < w.num_samples; ++j) {
    const std::uint32_t sample = w.num_samples > 1 ? j : s.sample;
    auto t = kernels::cpu::sample(logits, params, sample, position);
    SampledToken& o = out[j];
    o = SampledToken{w.seq, t.token, t.logprob, {}};
    if (s.sampling.logprobs)
      for (const auto& top : t.top) o.top.push_back({top.token, top.logprob});
  }
}

std::size_t HostSampler::rows(const Step& step) {
  std::size_t n = 0;
  for (const SeqWork& w : step.seqs) n += !w.padding && w.num_samples > 0;
  return n;
}

void HostSampler::sample(const Step& step, const std::vector<const SequenceState::Sequence*>& work,
                         std::span<const float> logits_all, std::size_t vocab, kernels::cpu::ThreadPool* pool,
                         std::vector<SampledToken>& out) {
  rows_.clear();
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < step.seqs.size(); ++i) {
    const SeqWork& w = step.seqs[i];
    if (w.padding || w.num_samples == 0) continue;
    rows_.push_back({i, tokens});
    tokens += w.num_samples;
  }
  out.resize(tokens);
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  const auto run = [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> processed;  // [vocab]: a row changed by its sampling parameters
    for (std::int64_t k = begin; k < end; ++k) {
      try {
        const RowJob& job = rows_[static_cast<std::size_t>(k)];
        sample_row(step.seqs[job.seq], *work[job.seq], logits_all.subspan(static_cast<std::size_t>(k) * vocab, vocab),
                   &out[job.first], processed);
      } catch (...) {  // the pool's functions must not throw: the first failure is rethrown below
        if (!failed.exchange(true)) failure = std::current_exception();
        return;
      }
    }
  };
  if (rows_.size() < 2 || pool == nullptr || pool->size() == 1) run(0, static_cast<std::int64_t>(rows_.size()));
  else pool->parallel_for(static_cast<std::int64_t>(rows_.size()), 1, run);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace actorlm::shard
