#pragma once
// The cuda backend's work for one tensor-parallel rank on its GPU, without CAF: folds a Step's
// deltas into its sequence state, applies the block copies and swaps to its KV cache, runs the
// model forward on its stream (kernels/cuda/model/cuda_transformer.hpp) and, on the sampling
// rank (tensor rank 0), samples the next tokens (cuda_sampler.hpp: greedy rows on the GPU, the
// others on the host by the cpu backend's sampler). The shard actor wraps one; every call runs
// on the actor's thread, which makes the shard's device current.

#include "actors/shard/cuda/cuda_sampler.hpp"
#include "actors/shard/sequence_state.hpp"
#include "actors/shard/shard_messages.hpp"
#include "kernels/cuda/model/cuda_kv_cache.hpp"
#include "kernels/cuda/model/cuda_transformer.hpp"

#include <memory>

namespace actorlm::shard {

struct CudaShardOptions {
  int device = 0;
  std::uint32_t block_size = 16;
  std::uint32_t device_blocks = 0;
  std::uint32_t host_blocks = 0;
  kernels::cuda::ActDtype kv_dtype = kernels::cuda::ActDtype::f16;
  // The largest step, whose buffers are allocated at start, before the KV cache: rows
  // (scheduler.max_num_batched_tokens), sequences (max_num_seqs) and their length (max_model_len).
  std::int64_t max_batched_tokens = 2048;
  std::int32_t max_seqs = 64;
  std::uint32_t max_model_len = 2048;
  // Decode steps as CUDA graphs (engine.cuda_graphs; CudaTransformer::enable_graphs).
  bool graphs = false;
};

class CudaShard {
 public:
  // Uploads `host_weights` (this rank's share, from kernels::cpu::load_weights) to the device in
  // `dtype`, allocates the KV cache and swap space, and drops nothing of the caller's.
  // `all_reduce` sums over the tensor-parallel group (unused when world == 1). Throws
  // std::runtime_error when the device runs out of memory, naming what did not fit.
  CudaShard(const kernels::cpu::ModelWeights& host_weights, kernels::cuda::ActDtype dtype,
            const CudaShardOptions& options, kernels::cuda::DeviceAllReduce all_reduce = {});
  ~CudaShard();
  CudaShard(const CudaShard&) = delete;
  CudaShard& operator=(const CudaShard&) = delete;

  // Throws std::invalid_argument for a step this shard cannot run (block size, token ids, block
  // tables): the actor turns that into an error reply.
  StepResult execute(const Step& step);

  std::int32_t shard_rank() const { return weights_.rank; }
  int device() const { return device_; }
  std::size_t weight_bytes() const { return weights_.bytes; }
  const SequenceState& sequences() const { return seqs_; }
  // Steps whose forward ran as a CUDA graph (CudaShardOptions::graphs).
  std::uint64_t graph_steps() const { return transformer_->graph_steps(); }
  std::uint64_t graph_captures() const { return transformer_->graph_captures(); }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  kernels::cuda::CudaWeights weights_;
  std::unique_ptr<kernels::cuda::CudaKvCache> cache_;
  std::unique_ptr<kernels::cuda::CudaTransformer> transformer_;
  SequenceState seqs_;
  std::vector<kernels::cpu::ForwardSeq> batch_;
  CudaSampler sampler_;
};

}  // namespace actorlm::shard
