#pragma once
// A model's weights in float, as one tensor-parallel rank holds them. Attention heads and FFN
// columns are split Megatron-style: Q/K/V and the FFN's first projection by output rows, the
// attention output and FFN down projection by input columns, so each rank's partial outputs
// are summed by one all-reduce. KV heads are split when there are at least as many as ranks,
// otherwise replicated (each rank keeps the one its query heads read).

#include "kernels/cpu/model/model_spec.hpp"

#include <vector>

namespace actorlm::kernels::cpu {

// Which heads a rank owns.
struct HeadPartition {
  std::int32_t q_begin = 0, q_count = 0;    // global query heads [q_begin, q_begin + q_count)
  std::int32_t kv_begin = 0, kv_count = 0;  // global KV heads this rank stores
  std::int32_t ffn_begin = 0, ffn_count = 0;
  // The local KV head read by local query head j.
  std::int32_t kv_of(std::int32_t j) const { return j * kv_count / q_count; }
};

// Throws std::invalid_argument when heads, KV heads or FFN width do not divide over `world`.
HeadPartition partition_heads(const ModelSpec& spec, std::int32_t rank, std::int32_t world);

struct LayerWeights {
  std::vector<float> attn_norm, attn_norm_bias;  // [hidden]; bias: falcon only
  std::vector<float> mlp_norm, mlp_norm_bias;    // [hidden]; llama ffn_norm, falcon-40B ln_mlp;
                                                 // empty when the MLP reads attn_norm's output
  std::vector<float> wqkv;    // [(q_count + 2 kv_count) * head_dim, hidden]: Q rows, K rows, V rows
  std::vector<float> wo;      // [hidden, q_count * head_dim]
  std::vector<float> w_up;    // llama: [2 ffn_count, hidden], gate rows then up rows
                              // falcon: [ffn_count, hidden]
  std::vector<float> w_down;  // [hidden, ffn_count]
};

struct ModelWeights {
  ModelSpec spec;
  std::int32_t rank = 0, world = 1;
  HeadPartition heads;
  std::vector<float> embed;     // [vocab, hidden]
  std::vector<float> out_norm, out_norm_bias;  // [hidden]
  std::vector<float> lm_head;   // [vocab, hidden]; empty when tied (embed is used) or rank > 0
  std::vector<LayerWeights> layers;

  const float* output_matrix() const { return lm_head.empty() ? embed.data() : lm_head.data(); }
  std::size_t bytes() const;
};

// Loads and dequantizes this rank's share. Throws model::ModelFileError for a missing or
// misshapen tensor (naming it), std::invalid_argument for an impossible partition.
ModelWeights load_weights(const model::TensorSource& source, const ModelSpec& spec,
                          std::int32_t rank = 0, std::int32_t world = 1);

}  // namespace actorlm::kernels::cpu
