#include "actors/shard/cuda/cuda_sampler.hpp"

#include "actors/shard/logit_edits.hpp"
#include "kernels/cpu/sampling.hpp"
#include "kernels/cuda/cuda_check.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace actorlm::shard {

namespace {

namespace cu = kernels::cuda;

constexpr std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }

// What goes over for R rows, J draws and E edits:
// top_n [R] | edit offsets [R + 1] | draws [J] | edits [E].
struct InLayout {
  std::size_t top_n, offsets, draws, edits, bytes;
  InLayout(std::size_t R, std::size_t J, std::size_t E)
      : top_n(0),
        offsets(align16(R * 4)),
        draws(offsets + align16((R + 1) * 8)),
        edits(draws + align16(J * sizeof(cu::DrawJob))),
        bytes(edits + E * sizeof(kernels::cuda_math::LogitEdit)) {}
};

// What comes back: token [R] | logprob [R] | top [R, max_top] | draw token [J] | draw logprob [J].
struct OutLayout {
  std::size_t token, logprob, top, draw_token, draw_logprob, bytes;
  OutLayout(std::size_t R, std::size_t J)
      : token(0),
        logprob(align16(R * 4)),
        top(logprob + align16(R * 4)),
        draw_token(top + align16(R * CudaSampler::max_device_top * sizeof(cu::TokenLogprobPair))),
        draw_logprob(draw_token + align16(J * 4)),
        bytes(draw_logprob + J * 4) {}
};

// Parameters the cpu sampler accepts (it throws for the others: such rows go to it), with a
// finite temperature (the cpu sampler's answer to an infinite one is its own: leave it to it).
bool params_in_range(const SamplingParams& p) {
  return p.temperature >= 0 && std::isfinite(p.temperature) && p.top_p > 0 && p.top_p <= 1 && p.min_p >= 0 &&
         p.min_p <= 1;
}

}  // namespace

// Each buffer against its own size: a device allocation that failed (and threw) after its host
// twin grew leaves the device one small, and the next step grows it again.
void CudaSampler::grow(std::size_t in_bytes, std::size_t out_bytes) {
  const auto more = [](std::size_t n) { return n + n / 2; };
  if (in_bytes > in_host_.bytes()) in_host_.reserve(more(in_bytes), "the sampler's inputs");
  if (in_bytes > in_device_.bytes()) in_device_.reserve(more(in_bytes), "the sampler's inputs");
  if (out_bytes > out_host_.bytes()) out_host_.reserve(more(out_bytes), "the sampler's results");
  if (out_bytes > out_device_.bytes()) out_device_.reserve(more(out_bytes), "the sampler's results");
}

void CudaSampler::reserve(std::size_t rows) {
  grow(InLayout(rows, rows, 0).bytes, OutLayout(rows, rows).bytes);
}

void CudaSampler::prepare(const Step& step, const std::vector<const SequenceState::Sequence*>& work, std::size_t vocab) {
  rows_.clear();
  edits_.clear();
  offsets_.clear();
  jobs_.clear();
  tokens_ = 0;
  host_rows_count_ = 0;
  for (std::size_t i = 0; i < step.seqs.size(); ++i) {
    const SeqWork& w = step.seqs[i];
    if (w.padding || w.num_samples == 0) continue;
    const auto& s = *work[i];
    const SamplingParams& p = s.sampling;
    offsets_.push_back(static_cast<std::int64_t>(edits_.size()));
    Where where = p.temperature < kernels::cpu::kGreedyTemperature ? Where::greedy : Where::draw;
    if ((p.logprobs && p.top_logprobs > std::uint32_t(max_device_top)) || !params_in_range(p) ||
        (p.changes_logits(s.generated().size()) && !logit_edits(s, vocab, edits_)))
      where = Where::host;
    rows_.push_back({i, tokens_, where, jobs_.size()});
    if (where == Where::draw) {
      const std::uint64_t position = w.end;  // of the token drawn, as the host sampler's
      for (std::uint32_t j = 0; j < w.num_samples; ++j) {
        const std::uint32_t sample = w.num_samples > 1 ? j : s.sample;
        jobs_.push_back({kernels::cpu::counter_uniform(p.seed, sample, position),
                         static_cast<std::int32_t>(rows_.size() - 1), p.temperature, p.top_k, p.top_p, p.min_p, 0});
      }
    }
    tokens_ += w.num_samples;
    host_rows_count_ += where == Where::host;
  }
  offsets_.push_back(static_cast<std::int64_t>(edits_.size()));
  prepared_step_ = std::nullopt;
  const std::size_t R = rows_.size(), J = jobs_.size(), E = edits_.size();
  if (R > 0) {
    grow(InLayout(R, J, E).bytes, OutLayout(R, J).bytes);
    const std::size_t need = host_rows_count_ * vocab * sizeof(float);
    if (need > host_rows_.bytes()) host_rows_.reserve(need + need / 2, "the logits of rows sampled on the host");
  }
  prepared_step_ = step.id;  // only once every buffer is there
}

void CudaSampler::sample(const Step& step, const std::vector<const SequenceState::Sequence*>& work, float* logits,
                         std::size_t logit_rows, std::size_t vocab, cudaStream_t stream, std::vector<SampledToken>& out) {
  if (prepared_step_ != step.id) throw std::logic_error("cuda sampler: sample() without prepare() for the step");
  prepared_step_ = std::nullopt;
  out.resize(tokens_);
  const std::size_t R = rows_.size(), J = jobs_.size(), E = edits_.size();
  if (R != logit_rows)
    throw std::logic_error("cuda sampler: the step samples " + std::to_string(R) + " rows but the forward computed " +
                           std::to_string(logit_rows) + " rows of logits");
  if (R == 0) return;

  const InLayout in(R, J, E);
  const OutLayout at(R, J);
  auto* hi = in_host_.as<std::byte>();
  auto* di = in_device_.as<std::byte>();
  auto* top_n = reinterpret_cast<std::int32_t*>(hi + in.top_n);
  for (std::size_t k = 0; k < R; ++k) {
    const auto& s = *work[rows_[k].seq];
    top_n[k] = rows_[k].where != Where::host && s.sampling.logprobs ? static_cast<std::int32_t>(s.sampling.top_logprobs) : 0;
  }
  std::memcpy(hi + in.offsets, offsets_.data(), offsets_.size() * 8);
  if (J > 0) std::memcpy(hi + in.draws, jobs_.data(), J * sizeof(cu::DrawJob));
  if (E > 0) std::memcpy(hi + in.edits, edits_.data(), E * sizeof(kernels::cuda_math::LogitEdit));
  ACTORLM_CUDA_CHECK(cudaMemcpyAsync(di, hi, in.bytes, cudaMemcpyHostToDevice, stream));

  auto* d = out_device_.as<std::byte>();
  if (E > 0)
    cu::apply_logit_edits({logits, reinterpret_cast<const kernels::cuda_math::LogitEdit*>(di + in.edits),
                           reinterpret_cast<const std::int64_t*>(di + in.offsets), static_cast<std::int64_t>(R),
                           static_cast<std::int64_t>(vocab)},
                          stream);
  // Every row goes through the argmax kernel (a host row's result is ignored): one launch, no
  // gather; a drawn row keeps its top list from it.
  cu::greedy_sample({logits, reinterpret_cast<const std::int32_t*>(di + in.top_n), reinterpret_cast<std::int32_t*>(d + at.token),
                     reinterpret_cast<float*>(d + at.logprob), reinterpret_cast<cu::TokenLogprobPair*>(d + at.top),
                     static_cast<std::int64_t>(R), static_cast<std::int64_t>(vocab), max_device_top},
                    stream);
  if (J > 0)
    cu::draw_sample({logits, reinterpret_cast<const cu::DrawJob*>(di + in.draws), reinterpret_cast<std::int32_t*>(d + at.draw_token),
                     reinterpret_cast<float*>(d + at.draw_logprob), static_cast<std::int64_t>(J),
                     static_cast<std::int64_t>(vocab)},
                    stream);
  auto* h = out_host_.as<std::byte>();
  ACTORLM_CUDA_CHECK(cudaMemcpyAsync(h, d, at.bytes, cudaMemcpyDeviceToHost, stream));
  if (host_rows_count_ > 0) {
    std::size_t j = 0;
    for (std::size_t k = 0; k < R; ++k)
      if (rows_[k].where == Where::host)
        ACTORLM_CUDA_CHECK(cudaMemcpyAsync(host_rows_.as<float>() + (j++) * vocab, logits + k * vocab,
                                           vocab * sizeof(float), cudaMemcpyDeviceToHost, stream));
  }
  cu::timed_sync(stream, waited_ns_);

  const auto* token = reinterpret_cast<const std::int32_t*>(h + at.token);
  const auto* logprob = reinterpret_cast<const float*>(h + at.logprob);
  const auto* top = reinterpret_cast<const cu::TokenLogprobPair*>(h + at.top);
  const auto* draw_token = reinterpret_cast<const std::int32_t*>(h + at.draw_token);
  const auto* draw_logprob = reinterpret_cast<const float*>(h + at.draw_logprob);
  std::size_t j = 0;
  for (std::size_t k = 0; k < R; ++k) {
    const Row& row = rows_[k];
    const SeqWork& w = step.seqs[row.seq];
    const auto& s = *work[row.seq];
    if (row.where == Where::host) {
      HostSampler::sample_row(w, s, std::span<const float>(host_rows_.as<float>() + (j++) * vocab, vocab),
                              &out[row.first], scratch_);
      continue;
    }
    if (token[k] < 0) throw std::invalid_argument("sample: every logit is -inf or NaN");
    for (std::uint32_t n = 0; n < w.num_samples; ++n) {  // greedy: every sample draws the argmax
      SampledToken& o = out[row.first + n];
      if (row.where == Where::draw) {
        const std::size_t at_draw = row.first_draw + n;
        if (draw_token[at_draw] < 0) throw std::invalid_argument("sample: every logit is -inf or NaN");
        o = SampledToken{w.seq, draw_token[at_draw], draw_logprob[at_draw], {}};
      } else {
        o = SampledToken{w.seq, token[k], logprob[k], {}};
      }
      for (std::int32_t t = 0; t < top_n[k]; ++t) {
        const auto& e = top[k * max_device_top + static_cast<std::size_t>(t)];
        if (e.token < 0) break;
        o.top.push_back({e.token, e.logprob});
      }
    }
  }
}

}  // namespace actorlm::shard
