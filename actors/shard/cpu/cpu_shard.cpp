#include "actors/shard/cpu/cpu_shard.hpp"

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
    take_prompt_logprobs(step, work, logits_, static_cast<std::size_t>(weights_->spec.vocab), &transformer_.pool(),
                         r.prompt_logprobs);
    sampler_.sample(step, work, logits_, static_cast<std::size_t>(weights_->spec.vocab), &transformer_.pool(), r.tokens);
    // A prompt's rows (rows x vocab floats: 1.6 GB for 8,192 tokens of a 49k vocabulary) are
    // not kept for the next step.
    if (!r.prompt_logprobs.empty()) std::vector<float>().swap(logits_);
  }
  r.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start).count();
  r.host_ns = r.duration_ns;  // no device to wait for
  return r;
}

}  // namespace actorlm::shard
