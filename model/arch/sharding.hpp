#pragma once
// How an Architecture splits over tensor-parallel ranks (Megatron-LM's scheme, as vLLM and
// TensorRT-LLM use it), and over the GPUs of a layer split. The one place these rules live: the
// cpu backend loads weights and sizes its KV cache with them, the simulator's memory and cost
// models size each GPU with them.
//
// Tensor parallelism over `degree` ranks:
//   - query heads split evenly: rank r holds heads [r * heads/degree, (r + 1) * heads/degree);
//     Q/K/V rows and the attention output's columns follow them;
//   - KV heads split evenly when degree divides them; when there are fewer KV heads than ranks
//     and the ranks divide evenly among them, each rank keeps a copy of the one KV head its
//     query heads read (replication);
//   - FFN columns split evenly: the first projection(s) by rows, the down projection by columns,
//     so the partial outputs are summed by one all-reduce;
//   - norms are replicated; the vocabulary (embedding, LM head) may be split by rows (vocab_rows).
// Anything else is refused with std::invalid_argument naming the count and the degree.

#include "model/arch/architecture.hpp"

#include <cstdint>
#include <vector>

namespace actorlm::model {

// What one tensor-parallel rank holds of every layer (the whole layer when degree = 1).
struct RankShard {
  std::uint32_t rank = 0, degree = 1;
  std::uint32_t q_begin = 0, q_heads = 0;      // global query heads [q_begin, q_begin + q_heads)
  std::uint32_t kv_begin = 0, kv_heads = 0;    // global KV heads [kv_begin, kv_begin + kv_heads)
  bool kv_replicated = false;                  // fewer KV heads than ranks: others hold copies
  std::uint32_t ffn_begin = 0, ffn_columns = 0;  // MLP intermediate columns
  // ceil(vocab / degree): one rank's rows of a vocabulary-parallel embedding and LM head
  // (Megatron's VocabParallelEmbedding, vLLM's, the cuda backend's; the last rank's fewer). The
  // cpu backend keeps the whole vocabulary on every rank instead.
  std::uint32_t vocab_rows = 0;

  // The local KV head read by local query head j (grouped-query attention).
  std::uint32_t kv_of(std::uint32_t j) const { return j * kv_heads / q_heads; }
};

// Throws std::invalid_argument when `a` does not split over `degree` ranks: "tensor parallel
// degree 4: 71 attention heads cannot be split evenly over 4 ranks (degrees that can: 1, 71)".
void check_shardable(const Architecture& a, std::uint32_t degree);
// Every degree in [1, max_degree] that check_shardable accepts.
std::vector<std::uint32_t> shardable_degrees(const Architecture& a, std::uint32_t max_degree);
// Rank `rank` of `degree`. Throws std::invalid_argument as check_shardable, or for a rank
// outside [0, degree).
RankShard shard_for_rank(const Architecture& a, std::uint32_t rank, std::uint32_t degree);

// Elements of one layer's weights on one rank: Q/K/V rows, attention output columns, MLP,
// replicated norms. Multiply by the element size for bytes.
std::uint64_t layer_weight_elements(const Architecture& a, const RankShard& r);
// K and V elements one token takes in one rank's cache over `layers` layers:
// 2 x layers x kv_heads x head_dim (a block is [kv_heads, block_size, head_dim] per layer and K/V).
std::uint64_t kv_elements_per_token(const Architecture& a, const RankShard& r, std::uint32_t layers);

// Layer split (HF Accelerate's device_map): layers on GPU `stage` of `stages`, contiguous, the
// first layers % stages GPUs taking one more. Throws std::invalid_argument when there are more
// stages than layers or `stage` is out of range.
std::uint32_t layers_of_stage(const Architecture& a, std::uint32_t stages, std::uint32_t stage);
// The first layer of that stage (the layers of the stages before it). Throws as layers_of_stage.
std::uint32_t first_layer_of_stage(const Architecture& a, std::uint32_t stages, std::uint32_t stage);

}  // namespace actorlm::model
