#include "actors/shard/cpu/cpu_shard.hpp"

#include "kernels/cpu/sampling.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>

namespace actorlm::shard {

namespace {

template <class Move>
std::vector<kernels::BlockPair> pairs(const std::vector<Move>& moves) {
  std::vector<kernels::BlockPair> out;
  out.reserve(moves.size());
  for (const auto& m : moves) out.push_back({m.src, m.dst});
  return out;
}

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

// SamplingParams' changes to one row, in its order (vLLM's: logits processors, then penalties).
void process_logits(const SequenceState::Sequence& s, std::span<float> row) {
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

}  // namespace

CpuShard::CpuShard(std::shared_ptr<const kernels::cpu::ModelWeights> weights,
                   const CpuShardOptions& o, kernels::cpu::AllReduce all_reduce, kernels::cpu::StageLink link)
    : weights_(std::move(weights)),
      cache_(weights_->spec, weights_->heads, o.block_size, o.device_blocks, o.host_blocks, o.kv_dtype,
             static_cast<std::uint32_t>(weights_->layers.size())),
      transformer_(*weights_, std::move(all_reduce), o.threads, std::move(link)) {}

StepResult CpuShard::execute(const Step& step) {
  const auto start = std::chrono::steady_clock::now();
  if (step.block_size != cache_.block_size())
    throw std::invalid_argument("cpu shard: step block size " + std::to_string(step.block_size) +
                                " but the cache uses " + std::to_string(cache_.block_size()));
  const auto& work = seqs_.apply(step);  // throws std::invalid_argument for a bad delta
  try {
    // The block manager's order: moves out free device blocks that moves in may reuse; copies
    // (copy-on-write, forks) may read blocks just moved in.
    cache_.swap_out(pairs(step.swap_out));
    cache_.swap_in(pairs(step.swap_in));
    cache_.copy(pairs(step.copies));

    batch_.clear();
    for (std::size_t i = 0; i < step.seqs.size(); ++i) {
      const SeqWork& w = step.seqs[i];
      if (w.padding) continue;  // dynamic batching's finished members
      const auto& s = *work[i];
      batch_.push_back({std::span<const std::int32_t>(s.tokens.data() + w.begin, w.end - w.begin), w.begin,
                        std::span<const std::uint32_t>(s.block_table.data(), s.block_table.size()),
                        w.num_samples > 0});
    }
    transformer_.forward(batch_, cache_, weights_->samples(), logits_, step.id);
  } catch (const std::out_of_range& e) {
    throw std::invalid_argument(std::string("cpu shard: ") + e.what());
  }

  StepResult r;
  r.step_id = step.id;
  if (weights_->samples()) sample_rows(step, work, r.tokens);
  r.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start).count();
  return r;
}

// Rows are independent (a draw depends on its row, its parameters and its counter-based seed
// only), so the step's rows are sampled on the forward's pool, the same bits in any split.
void CpuShard::sample_rows(const Step& step, const std::vector<const SequenceState::Sequence*>& work,
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
  const auto vocab = static_cast<std::size_t>(weights_->spec.vocab);
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  const auto run = [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> processed;  // [vocab]: a row changed by its sampling parameters
    for (std::int64_t k = begin; k < end; ++k) {
      try {
        const RowJob& job = rows_[static_cast<std::size_t>(k)];
        const SeqWork& w = step.seqs[job.seq];
        const auto& s = *work[job.seq];
        std::span<const float> logits(logits_.data() + static_cast<std::size_t>(k) * vocab, vocab);
        if (s.sampling.changes_logits(s.generated().size())) {
          // The changed row: the draw and the reported log-probabilities both use it.
          processed.assign(logits.begin(), logits.end());
          process_logits(s, processed);
          logits = processed;
        }
        const auto params = sampler_params(s.sampling);
        const std::uint64_t position = w.end;  // of the token drawn
        for (std::uint32_t j = 0; j < w.num_samples; ++j) {
          const std::uint32_t sample = w.num_samples > 1 ? j : s.sample;
          auto t = kernels::cpu::sample(logits, params, sample, position);
          SampledToken& o = out[job.first + j];
          o = SampledToken{w.seq, t.token, t.logprob, {}};
          if (s.sampling.logprobs)
            for (const auto& top : t.top) o.top.push_back({top.token, top.logprob});
        }
      } catch (...) {  // the pool's functions must not throw: the first failure is rethrown below
        if (!failed.exchange(true)) failure = std::current_exception();
        return;
      }
    }
  };
  auto& pool = transformer_.pool();
  if (rows_.size() < 2 || pool.size() == 1) run(0, static_cast<std::int64_t>(rows_.size()));
  else pool.parallel_for(static_cast<std::int64_t>(rows_.size()), 1, run);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace actorlm::shard
