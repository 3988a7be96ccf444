#pragma once
// A step's next tokens from logits on the GPU. Every row is sampled on the device where it can
// be: its logit changes (bias, min_tokens' mask, repetition and OpenAI penalties) applied in place
// as per-token edits (actors/shard/logit_edits.hpp, kernels/cuda/draw_sample.hpp), then the
// argmax, log-probability and top list of every row (kernels/cuda/greedy_sample.hpp), and the
// draws under temperature, top-k, top-p and min-p (draw_sample.hpp) with the host sampler's
// uniform numbers; only tokens, log-probabilities and top entries come back. Rows the device
// does not take (more than max_device_top top log-probabilities, a token biased twice, parameters
// out of range) are copied back one by one and drawn by the host sampler, the cpu backend's.
// Either way: the cpu backend's draws for the same logits (on the device, except where a draw's
// uniform number lands within rounding of a token's boundary).

#include "actors/shard/host_sampler.hpp"
#include "kernels/cuda/draw_sample.hpp"
#include "kernels/cuda/greedy_sample.hpp"
#include "kernels/cuda/model/device_buffer.hpp"

#include <cuda_runtime_api.h>

#include <optional>
#include <vector>

namespace actorlm::shard {

class CudaSampler {
 public:
  static constexpr std::int32_t max_device_top = 20;  // OpenAI's top_logprobs limit

  // Sizes the buffers for steps of up to `rows` sampled rows, one draw each and no edits (a shard
  // calls it at start, before its KV cache takes the rest of the device); larger steps grow them.
  void reserve(std::size_t rows);

  // The step's host work before its forward: which rows go where, their edits and draws, and
  // every buffer they need grown. No allocation may come between a step's first collective and
  // the stream synchronisation that ends it (a cudaFree or cudaMallocHost can wait for a device
  // whose all-reduce waits for a peer rank of this process, which may be waiting on the driver).
  void prepare(const Step& step, const std::vector<const SequenceState::Sequence*>& work, std::size_t vocab);

  // `logits`: [logit_rows, vocab] f32 on the device, one row per SeqWork with num_samples > 0 in
  // step order, produced on `stream`; rows with logit changes are changed in place. Needs the
  // step prepared. Synchronises the stream. Throws std::invalid_argument for a row whose every
  // logit is -inf or NaN (as the cpu sampler does), std::logic_error when the step was not
  // prepared or its sampled rows are not logit_rows.
  void sample(const Step& step, const std::vector<const SequenceState::Sequence*>& work, float* logits,
              std::size_t logit_rows, std::size_t vocab, cudaStream_t stream, std::vector<SampledToken>& out);

  // Nanoseconds spent waiting on the stream in sample() since construction.
  std::int64_t waited_ns() const { return waited_ns_; }

 private:
  enum class Where { greedy, draw, host };
  struct Row {
    std::size_t seq;    // index into step.seqs
    std::size_t first;  // its first entry in the result's tokens
    Where where;
    std::size_t first_draw;  // Where::draw: its first draw
  };
  void grow(std::size_t in_bytes, std::size_t out_bytes);
  std::vector<Row> rows_;
  std::size_t tokens_ = 0, host_rows_count_ = 0;
  std::optional<std::uint64_t> prepared_step_;
  std::int64_t waited_ns_ = 0;
  std::vector<float> scratch_;
  std::vector<kernels::cuda_math::LogitEdit> edits_;
  std::vector<std::int64_t> offsets_;
  std::vector<kernels::cuda::DrawJob> jobs_;
  kernels::cuda::PinnedBuffer in_host_;    // top_n, edit offsets, draws, edits
  kernels::cuda::DeviceBuffer in_device_;  // the same on the device
  kernels::cuda::PinnedBuffer out_host_;   // tokens, log-probabilities, top entries, draws' tokens and theirs
  kernels::cuda::DeviceBuffer out_device_; // the same on the device
  kernels::cuda::PinnedBuffer host_rows_;  // the host rows' logits
};

}  // namespace actorlm::shard
