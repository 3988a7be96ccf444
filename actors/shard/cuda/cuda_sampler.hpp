#pragma once
// A step's next tokens from logits on the GPU. Rows whose draw is the plain argmax (greedy,
// nothing changing the row; at most max_device_top top log-probabilities) are sampled on the
// device (kernels/cuda/greedy_sample.hpp): only their token, log-probability and top entries
// come back. The other rows (temperature, filters, penalties, logit bias, min_tokens' mask) are
// copied back one by one and drawn by the host sampler, the cpu backend's: the same draws for
// the same logits.

#include "actors/shard/host_sampler.hpp"
#include "kernels/cuda/greedy_sample.hpp"
#include "kernels/cuda/model/device_buffer.hpp"

#include <cuda_runtime_api.h>

#include <vector>

namespace actorlm::shard {

class CudaSampler {
 public:
  static constexpr std::int32_t max_device_top = 20;  // OpenAI's top_logprobs limit

  // Sizes the buffers for steps of up to `rows` sampled rows (a shard calls it at start, before
  // its KV cache takes the rest of the device); larger steps grow them.
  void reserve(std::size_t rows);

  // `logits`: [logit_rows, vocab] f32 on the device, one row per SeqWork with num_samples > 0 in
  // step order, produced on `stream`. Synchronises the stream. Throws std::invalid_argument for a
  // row whose every logit is -inf or NaN (as the cpu sampler does), std::logic_error when the
  // step's sampled rows are not logit_rows.
  void sample(const Step& step, const std::vector<const SequenceState::Sequence*>& work, const float* logits,
              std::size_t logit_rows, std::size_t vocab, cudaStream_t stream, std::vector<SampledToken>& out);

 private:
  struct Row {
    std::size_t seq;    // index into step.seqs
    std::size_t first;  // its first entry in the result's tokens
    bool device;        // greedy on the GPU
  };
  static std::size_t result_bytes(std::size_t rows);
  std::vector<Row> rows_;
  std::vector<float> scratch_;
  kernels::cuda::PinnedBuffer host_;      // top_n, then tokens, log-probabilities, top entries
  kernels::cuda::DeviceBuffer device_;    // the same on the device
  kernels::cuda::PinnedBuffer host_rows_; // the host rows' logits
};

}  // namespace actorlm::shard
