#include "actors/shard/cpu/cpu_shard.hpp"

#include "actors/shard/prompt_logprobs.hpp"
#include "actors/shard/step_batch.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

namespace actorlm::shard {

CpuShard::CpuShard(std::shared_ptr<const kernels::cpu::ModelWeights> weights,
                   const CpuShardOptions& o, kernels::cpu::AllReduce all_reduce, kernels::cpu::StageLink link)
    : weights_(std::move(weights)),
      cache_(weights_->spec, weights_->heads, o.block_size, o.device_blocks, o.host_blocks, o.kv_dtype,
             static_cast<std::uint32_t>(weights_->layers.size())),
      transformer_(*weights_, std::move(all_reduce), o.threads, std::move(link)),
      prompt_slice_(o.prompt_rows_per_slice > 0 ? o.prompt_rows_per_slice
                                                : prompt_rows_per_slice(static_cast<std::size_t>(weights_->spec.vocab))) {}

StepResult CpuShard::execute(const Step& step) {
  const auto start = std::chrono::steady_clock::now();
  if (step.block_size != cache_.block_size())
    throw std::invalid_argument("cpu shard: step block size " + std::to_string(step.block_size) +
                                " but the cache uses " + std::to_string(cache_.block_size()));
  const auto& work = seqs_.apply(step);  // throws std::invalid_argument for a bad delta
  try {
    // The block manager's order: moves out free device blocks that moves in may reuse; copies
    // (copy-on-write, forks) may read blocks just moved in.
    cache_.swap_out(block_pairs(step.swap_out));
    cache_.swap_in(block_pairs(step.swap_in));
    cache_.copy(block_pairs(step.copies));

    forward_batch(step, work, batch_);
    transformer_.forward(batch_, cache_, weights_->samples(), logits_, step.id);
  } catch (const std::out_of_range& e) {
    throw std::invalid_argument(std::string("cpu shard: ") + e.what());
  }

  StepResult r;
  r.step_id = step.id;
  if (weights_->samples()) {
    const auto vocab = static_cast<std::size_t>(weights_->spec.vocab);
    take_prompt_logprobs(
        step, work, transformer_.prompt_rows(),
        [this](std::int64_t first, std::int64_t count, std::vector<float>& out) { transformer_.prompt_logits(first, count, out); },
        vocab, prompt_slice_, &transformer_.pool(), r.prompt_logprobs);
    sampler_.sample(step, work, logits_, vocab, &transformer_.pool(), r.tokens);
  }
  // The last stage of a layer split runs again only after the earlier stages' share of the next
  // step (they rest as they hand over, in the forward).
  if (weights_->stages > 1 && weights_->last_stage()) transformer_.pool().rest();
  r.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start).count();
  r.host_ns = r.duration_ns;  // no device to wait for
  return r;
}

}  // namespace actorlm::shard
