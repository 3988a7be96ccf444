#include "actors/shard/cuda/cuda_sampler.hpp"

#include "kernels/cuda/cuda_check.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace actorlm::shard {

namespace {

constexpr std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }

// Offsets in the results block: top_n [R] | token [R] | logprob [R] | top [R, max_top].
struct Layout {
  std::size_t top_n, token, logprob, top, bytes;
  explicit Layout(std::size_t R)
      : top_n(0),
        token(align16(R * 4)),
        logprob(token + align16(R * 4)),
        top(logprob + align16(R * 4)),
        bytes(top + R * CudaSampler::max_device_top * sizeof(kernels::cuda::TokenLogprobPair)) {}
};

}  // namespace

std::size_t CudaSampler::result_bytes(std::size_t rows) { return Layout(rows).bytes; }

void CudaSampler::reserve(std::size_t rows) {
  host_.reserve(result_bytes(rows), "the sampler's results");
  device_.reserve(result_bytes(rows), "the sampler's results");
}

void CudaSampler::sample(const Step& step, const std::vector<const SequenceState::Sequence*>& work, const float* logits,
                         std::size_t logit_rows, std::size_t vocab, cudaStream_t stream, std::vector<SampledToken>& out) {
  namespace cu = kernels::cuda;
  rows_.clear();
  std::size_t tokens = 0, host_rows = 0;
  for (std::size_t i = 0; i < step.seqs.size(); ++i) {
    const SeqWork& w = step.seqs[i];
    if (w.padding || w.num_samples == 0) continue;
    const auto& s = *work[i];
    const bool device = HostSampler::plain_greedy(s) &&
                        (!s.sampling.logprobs || s.sampling.top_logprobs <= std::uint32_t(max_device_top));
    rows_.push_back({i, tokens, device});
    tokens += w.num_samples;
    host_rows += !device;
  }
  out.resize(tokens);
  const std::size_t R = rows_.size();
  if (R != logit_rows)
    throw std::logic_error("cuda sampler: the step samples " + std::to_string(R) + " rows but the forward computed " +
                           std::to_string(logit_rows) + " rows of logits");
  if (R == 0) return;

  // One pinned block and its device twin (Layout), grown by half again when a step outgrows it.
  const Layout at(R);
  const std::size_t top_n_at = at.top_n, token_at = at.token, logprob_at = at.logprob, top_at = at.top, bytes = at.bytes;
  if (bytes > host_.bytes()) reserve(R + R / 2);
  auto* h = host_.as<std::byte>();
  auto* d = device_.as<std::byte>();
  auto* top_n = reinterpret_cast<std::int32_t*>(h + top_n_at);
  for (std::size_t k = 0; k < R; ++k) {
    const auto& s = *work[rows_[k].seq];
    top_n[k] = rows_[k].device && s.sampling.logprobs ? static_cast<std::int32_t>(s.sampling.top_logprobs) : 0;
  }
  ACTORLM_CUDA_CHECK(cudaMemcpyAsync(d + top_n_at, h + top_n_at, R * 4, cudaMemcpyHostToDevice, stream));
  // Every row goes through the kernel (a host row's result is ignored): one launch, no gather.
  cu::greedy_sample({logits, reinterpret_cast<const std::int32_t*>(d + top_n_at), reinterpret_cast<std::int32_t*>(d + token_at),
                     reinterpret_cast<float*>(d + logprob_at), reinterpret_cast<cu::TokenLogprobPair*>(d + top_at),
                     static_cast<std::int64_t>(R), static_cast<std::int64_t>(vocab), max_device_top},
                    stream);
  ACTORLM_CUDA_CHECK(cudaMemcpyAsync(h + token_at, d + token_at, bytes - token_at, cudaMemcpyDeviceToHost, stream));
  if (host_rows > 0) {
    const std::size_t need = host_rows * vocab * sizeof(float);
    if (need > host_rows_.bytes()) host_rows_.reserve(need + need / 2, "the logits of rows sampled on the host");
    std::size_t j = 0;
    for (std::size_t k = 0; k < R; ++k)
      if (!rows_[k].device)
        ACTORLM_CUDA_CHECK(cudaMemcpyAsync(host_rows_.as<float>() + (j++) * vocab, logits + k * vocab,
                                           vocab * sizeof(float), cudaMemcpyDeviceToHost, stream));
  }
  ACTORLM_CUDA_CHECK(cudaStreamSynchronize(stream));

  const auto* token = reinterpret_cast<const std::int32_t*>(h + token_at);
  const auto* logprob = reinterpret_cast<const float*>(h + logprob_at);
  const auto* top = reinterpret_cast<const cu::TokenLogprobPair*>(h + top_at);
  std::size_t j = 0;
  for (std::size_t k = 0; k < R; ++k) {
    const Row& row = rows_[k];
    const SeqWork& w = step.seqs[row.seq];
    const auto& s = *work[row.seq];
    if (!row.device) {
      HostSampler::sample_row(w, s, std::span<const float>(host_rows_.as<float>() + (j++) * vocab, vocab),
                              &out[row.first], scratch_);
      continue;
    }
    if (token[k] < 0) throw std::invalid_argument("sample: every logit is -inf or NaN");
    for (std::uint32_t n = 0; n < w.num_samples; ++n) {  // greedy: every sample draws the argmax
      SampledToken& o = out[row.first + n];
      o = SampledToken{w.seq, token[k], logprob[k], {}};
      for (std::int32_t t = 0; t < top_n[k]; ++t) {
        const auto& e = top[k * max_device_top + static_cast<std::size_t>(t)];
        if (e.token < 0) break;
        o.top.push_back({e.token, e.logprob});
      }
    }
  }
}

}  // namespace actorlm::shard
