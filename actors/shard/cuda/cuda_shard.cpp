#include "actors/shard/cuda/cuda_shard.hpp"

#include "actors/shard/step_batch.hpp"
#include "kernels/cuda/cuda_check.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>

namespace actorlm::shard {

namespace {

cudaStream_t make_stream(int device) {
  ACTORLM_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  ACTORLM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

// The prompt slices take_prompt_logprobs projects, projected and not scored: what a
// vocabulary-parallel rank does in step with the sampling rank, whose projections each end in an
// all-reduce (and what the sampling rank does when it cannot score, so that the others are not
// left waiting).
void project_prompt_slices(kernels::cuda::CudaTransformer& t, const Step& step,
                           const std::vector<const SequenceState::Sequence*>& work, std::size_t vocab) {
  std::vector<float> none;
  for (const auto& [first, count] : prompt_slices(step, work, t.prompt_rows(), prompt_rows_per_slice(vocab)))
    t.prompt_logits(first, count, none);
}

}  // namespace

CudaShard::CudaShard(const kernels::cpu::ModelWeights& host_weights, kernels::cuda::ActDtype dtype,
                     const CudaShardOptions& o, kernels::cuda::DeviceAllReduce all_reduce)
    : device_(o.device), stream_(make_stream(o.device)) {
  try {
    if (o.block_size == 0 || (o.block_size & (o.block_size - 1)) != 0)
      throw std::invalid_argument("cuda shard: block size " + std::to_string(o.block_size) + " is not a power of two");
    weights_ = kernels::cuda::upload_weights(host_weights, dtype, stream_);
    transformer_ = std::make_unique<kernels::cuda::CudaTransformer>(weights_, stream_, std::move(all_reduce));
    // The largest step's buffers first: what the plan counts as activations is taken before the
    // KV cache takes the rest.
    const bool logits = weights_.computes_logits();  // logits only where they are computed
    transformer_->reserve(o.max_batched_tokens, o.max_seqs, o.max_model_len, logits ? o.max_seqs : 0, o.block_size,
                          o.kv_dtype, logits ? prompt_rows_per_slice(static_cast<std::size_t>(weights_.spec.vocab)) : 0);
    if (weights_.samples()) sampler_.reserve(static_cast<std::size_t>(o.max_seqs));
    if (o.graphs) transformer_->enable_graphs(o.max_seqs, o.max_model_len);
    cache_ = std::make_unique<kernels::cuda::CudaKvCache>(
        static_cast<std::uint32_t>(host_weights.layers.size()), static_cast<std::int32_t>(host_weights.heads.kv_heads),
        static_cast<std::int32_t>(host_weights.spec.head_dim), o.block_size, o.device_blocks, o.host_blocks,
        o.kv_dtype);
  } catch (...) {
    cudaStreamDestroy(stream_);
    throw;
  }
}

CudaShard::~CudaShard() {
  cudaSetDevice(device_);
  transformer_.reset();
  cache_.reset();
  weights_ = {};
  if (stream_) cudaStreamDestroy(stream_);
}

StepResult CudaShard::execute(const Step& step) {
  const auto start = std::chrono::steady_clock::now();
  ACTORLM_CUDA_CHECK(cudaSetDevice(device_));
  if (step.block_size != cache_->block_size())
    throw std::invalid_argument("cuda shard: step block size " + std::to_string(step.block_size) +
                                " but the cache uses " + std::to_string(cache_->block_size()));
  const auto& work = seqs_.apply(step);  // throws std::invalid_argument for a bad delta
  std::int64_t waited = -transformer_->waited_ns() - sampler_.waited_ns();
  try {
    // The block manager's order: moves out free device blocks that moves in may reuse; copies
    // (copy-on-write, forks) may read blocks just moved in. The swaps on the cache's own stream,
    // which the forward waits for layer by layer; the copies after all of them.
    cache_->apply(block_pairs(step.swap_out), block_pairs(step.swap_in), block_pairs(step.copies), stream_);

    // Everything the sampler allocates, before the forward's first collective. Should that fail
    // (out of memory), this rank still runs the forward, whose all-reduces the other ranks wait
    // for, and fails the step after it.
    std::exception_ptr unprepared;
    if (weights_.samples()) try {
        sampler_.prepare(step, work, static_cast<std::size_t>(weights_.spec.vocab));
      } catch (...) {
        unprepared = std::current_exception();
      }
    forward_batch(step, work, batch_);
    transformer_->forward(batch_, *cache_, weights_.computes_logits(), nullptr);  // logits stay on the GPU
    cache_->wait_swaps(stream_);  // what the forward did not wait for (a step with no rows)
    if (batch_.empty() || unprepared) kernels::cuda::timed_sync(stream_, waited);  // the copies and swaps are done
    if (unprepared) {
      if (weights_.vocab_parallel)
        project_prompt_slices(*transformer_, step, work, static_cast<std::size_t>(weights_.spec.vocab));
      std::rethrow_exception(unprepared);
    }
  } catch (const std::out_of_range& e) {
    throw std::invalid_argument(std::string("cuda shard: ") + e.what());
  }

  StepResult r;
  r.step_id = step.id;
  const auto vocab = static_cast<std::size_t>(weights_.spec.vocab);
  if (!weights_.samples() && weights_.computes_logits()) project_prompt_slices(*transformer_, step, work, vocab);
  if (weights_.samples()) {
    // Prompt log-probabilities: the kept rows projected on the GPU a slice at a time, scored on
    // the host as the cpu shard scores them.
    take_prompt_logprobs(
        step, work, transformer_->prompt_rows(),
        [this](std::int64_t first, std::int64_t count, std::vector<float>& out) {
          transformer_->prompt_logits(first, count, out);
        },
        vocab, prompt_rows_per_slice(vocab), nullptr, r.prompt_logprobs);
    sampler_.sample(step, work, transformer_->device_logits(), static_cast<std::size_t>(transformer_->logit_rows()),
                    vocab, stream_, r.tokens);
  }
  r.duration_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  waited += transformer_->waited_ns() + sampler_.waited_ns();
  r.host_ns = std::max<std::int64_t>(0, r.duration_ns - waited);
  return r;
}

}  // namespace actorlm::shard
