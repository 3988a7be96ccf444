#pragma once
// The cpu backend's work for one tensor-parallel rank, without CAF: folds a Step's deltas into
// its sequence state, applies the block copies and swaps to its KV cache, runs the model forward
// over the step's sequences, and (on the sampling rank: tensor rank 0 of the last layer-split
// stage) samples the next tokens. The shard actor wraps one.

#include "actors/shard/host_sampler.hpp"
#include "actors/shard/sequence_state.hpp"
#include "actors/shard/shard_messages.hpp"
#include "kernels/cpu/model/kv_cache.hpp"
#include "kernels/cpu/model/transformer.hpp"

#include <memory>

namespace actorlm::shard {

struct CpuShardOptions {
  std::uint32_t block_size = 16;
  std::uint32_t device_blocks = 0;
  std::uint32_t host_blocks = 0;
  std::int32_t threads = 1;  // the forward's thread pool, this rank's cores
  kernels::cpu::KvDtype kv_dtype = kernels::cpu::KvDtype::f32;
  // Prompt rows whose logits are computed at once for prompt log-probabilities (0: as many as
  // fit in 64 MiB, at most 256; prompt_rows_per_slice).
  std::int64_t prompt_rows_per_slice = 0;
};

class CpuShard {
 public:
  // `all_reduce` sums a buffer over the tensor-parallel group (unused when world == 1); `link`
  // joins a layer-split stage to the stages beside it (unused with one stage).
  CpuShard(std::shared_ptr<const kernels::cpu::ModelWeights> weights, const CpuShardOptions& options,
           kernels::cpu::AllReduce all_reduce = {}, kernels::cpu::StageLink link = {});

  // Throws std::invalid_argument for a step this shard cannot run (block size, token ids, block
  // tables): the actor turns that into an error reply.
  StepResult execute(const Step& step);

  const kernels::cpu::ModelWeights& weights() const { return *weights_; }
  std::int32_t shard_rank() const { return weights_->shard_rank(); }
  kernels::cpu::KvCache& cache() { return cache_; }
  const SequenceState& sequences() const { return seqs_; }

 private:
  std::shared_ptr<const kernels::cpu::ModelWeights> weights_;
  kernels::cpu::KvCache cache_;
  kernels::cpu::Transformer transformer_;
  SequenceState seqs_;  // what this rank holds of each sequence, from the incremental steps
  std::vector<kernels::cpu::ForwardSeq> batch_;
  std::vector<float> logits_;  // [rows, vocab]
  HostSampler sampler_;        // on the sampling rank
  std::int64_t prompt_slice_;  // CpuShardOptions::prompt_rows_per_slice, resolved
};

}  // namespace actorlm::shard
