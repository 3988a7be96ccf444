#pragma once
// A model's weights as one tensor-parallel rank holds them: matrices in their stored type
// (weight_matrix.hpp) or dequantized to float (WeightStorage::f32), norms in float; split by
// model/arch/sharding.hpp's rules: Q/K/V and the FFN's first projection by output rows, the
// attention output and FFN down projection by input columns, so each rank's partial outputs
// are summed by one all-reduce; KV heads split, or replicated when there are fewer than ranks.
// The vocabulary stays whole (the embedding on every rank, the LM head on rank 0) unless it is
// split by rows over the ranks (vocab_parallel, the cuda backend's layout under tensor parallelism).
// A layer split (pipeline stages) holds only its stage's layers (model::layers_of_stage); the
// first stage holds the embedding, the last the output norm and projection (and the embedding
// when the projection is tied to it).

#include "model/arch/architecture.hpp"
#include "model/arch/sharding.hpp"
#include "kernels/cpu/model/weight_matrix.hpp"

#include <vector>

namespace actorlm::model { class TensorSource; }

namespace actorlm::kernels::cpu {

struct LayerWeights {
  std::vector<float> attn_norm, attn_norm_bias;  // [hidden]; bias: falcon only
  std::vector<float> mlp_norm, mlp_norm_bias;    // [hidden]; llama ffn_norm, falcon-40B ln_mlp;
                                                 // empty when the MLP reads attn_norm's output
  WeightMatrix wqkv;    // [(q_heads + 2 kv_heads) * head_dim, hidden]: Q rows, K rows, V rows
  WeightMatrix wo;      // [hidden, q_heads * head_dim]
  WeightMatrix w_up;    // llama: [2 ffn_columns, hidden], gate rows then up rows
                        // falcon: [ffn_columns, hidden]
  WeightMatrix w_down;  // [hidden, ffn_columns]
};

struct ModelWeights {
  model::Architecture spec;    // the whole model's
  model::WeightLayout layout;  // how the checkpoint stored it (the rotary pairing is still needed)
  std::int32_t rank = 0, world = 1;
  model::RankShard heads;      // this rank's heads and FFN columns
  WeightStorage storage = WeightStorage::stored;
  WeightMatrix embed;           // [vocab, hidden] (vocab_parallel: this rank's rows of it)
  std::vector<float> out_norm, out_norm_bias;  // [hidden]
  WeightMatrix lm_head;         // [vocab, hidden] (vocab_parallel: this rank's rows); empty when
                                // tied (embed is used) or, without vocab_parallel, rank > 0
  // Split by vocabulary rows (load_weights' vocab_parallel): embed and lm_head hold the rows
  // [vocab_first, vocab_first + their rows) on every tensor rank, ceil(vocab / world) each
  // (model::RankShard::vocab_rows), the last rank's fewer.
  bool vocab_parallel = false;
  std::int64_t vocab_first = 0;
  std::vector<LayerWeights> layers;  // this stage's: model layers [first_layer, first_layer + size)
  std::uint32_t stage = 0, stages = 1, first_layer = 0;

  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage + 1 == stages; }
  // The rank that computes logits and samples: tensor rank 0 of the last stage.
  bool samples() const { return rank == 0 && last_stage(); }
  // Whether this rank computes logits: the sampling rank, and with vocab_parallel every rank of
  // the last stage (each its columns).
  bool computes_logits() const { return last_stage() && (rank == 0 || vocab_parallel); }
  // The engine's rank of this shard: stages in order, each its tensor ranks.
  std::int32_t shard_rank() const { return static_cast<std::int32_t>(stage) * world + rank; }

  const WeightMatrix& output_matrix() const { return lm_head.empty() ? embed : lm_head; }
  std::size_t bytes() const;    // as held in memory
  // What one decode step reads of the weights: every layer matrix and the output projection
  // once (the embedding rows looked up, norms and biases are not counted).
  std::size_t matrix_bytes_per_step() const;
};

// Loads this rank's share of `arch` (model::read_architecture(source), possibly altered by a
// test): tensor rank `rank` of `world`, of layer-split stage `stage` of `stages`, its matrices as
// `storage` says. Throws model::ModelFileError for a missing or misshapen tensor (naming it),
// std::invalid_argument for an impossible partition (model::check_shardable's and
// model::layers_of_stage's messages). `vocab_parallel`: the embedding and the LM head split by
// vocabulary rows over the tensor ranks, as Megatron and vLLM split them (the cuda backend under
// tensor parallelism); else the first stage's ranks hold the whole embedding and the sampling
// rank the whole LM head (the cpu backend).
ModelWeights load_weights(const model::TensorSource& source, const model::Architecture& arch,
                          std::int32_t rank = 0, std::int32_t world = 1,
                          WeightStorage storage = WeightStorage::stored, std::uint32_t stage = 0,
                          std::uint32_t stages = 1, bool vocab_parallel = false);

}  // namespace actorlm::kernels::cpu
