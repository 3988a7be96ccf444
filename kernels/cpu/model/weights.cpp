#include "kernels/cpu/model/weights.hpp"

#include "kernels/cpu/model/row_groups.hpp"

#include "model/format/dequantize.hpp"
#include "model/format/read_architecture.hpp"
#include "model/format/tensor_source.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace actorlm::kernels::cpu {

namespace {

using model::Family;
using Shape = std::vector<std::int64_t>;

// Tensor names of one checkpoint convention.
struct Names {
  std::string embed, out_norm, out_norm_bias, lm_head;
  std::string layer_prefix;  // followed by the layer index
  std::string attn_norm, attn_norm_bias, mlp_norm, mlp_norm_bias;
  std::string q, k, v, qkv, o, gate, up, down;
};

Names names_for(const model::Architecture& s, const model::WeightLayout& layout) {
  if (layout.format == model::CheckpointFormat::gguf) {
    Names n{"token_embd.weight", "output_norm.weight", "output_norm.bias", "output.weight",
            "blk.", ".attn_norm.weight", ".attn_norm.bias", ".ffn_norm.weight", "", ".attn_q.weight",
            ".attn_k.weight", ".attn_v.weight", ".attn_qkv.weight", ".attn_output.weight",
            ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight"};
    if (s.two_norms()) {
      // llama.cpp's converter maps the 40B design's ln_mlp to attn_norm and ln_attn to
      // attn_norm_2 (gguf-py tensor_mapping.py); its graph normalizes attention input by attn_norm_2.
      n.attn_norm = ".attn_norm_2.weight";
      n.attn_norm_bias = ".attn_norm_2.bias";
      n.mlp_norm = ".attn_norm.weight";
      n.mlp_norm_bias = ".attn_norm.bias";
    }
    return n;
  }
  if (s.family == Family::llama)
    return {"model.embed_tokens.weight", "model.norm.weight", "", "lm_head.weight",
            "model.layers.", ".input_layernorm.weight", "", ".post_attention_layernorm.weight", "",
            ".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight", "",
            ".self_attn.o_proj.weight", ".mlp.gate_proj.weight", ".mlp.up_proj.weight",
            ".mlp.down_proj.weight"};
  Names n{"transformer.word_embeddings.weight", "transformer.ln_f.weight", "transformer.ln_f.bias",
          "lm_head.weight", "transformer.h.", ".input_layernorm.weight", ".input_layernorm.bias",
          "", "", "", "", "", ".self_attention.query_key_value.weight", ".self_attention.dense.weight",
          "", ".mlp.dense_h_to_4h.weight", ".mlp.dense_4h_to_h.weight"};
  if (s.two_norms()) {
    n.attn_norm = ".ln_attn.weight";
    n.attn_norm_bias = ".ln_attn.bias";
    n.mlp_norm = ".ln_mlp.weight";
    n.mlp_norm_bias = ".ln_mlp.bias";
  }
  return n;
}

// Reads matrices as stored or dequantized, as the storage asks.
struct MatrixReader {
  const model::TensorSource& src;
  WeightStorage storage;

  WeightMatrix operator()(const std::string& name, std::int64_t rows, std::int64_t cols) const {
    const Shape shape{rows, cols};
    if (storage == WeightStorage::f32) return f32_matrix(src.read_f32(name, shape), rows, cols);
    const auto stored = src.read_stored(name, shape);
    const model::DType t = stored.info->dtype;
    if (!model::storage_bytes(t, cols))
      throw model::ModelFileError(src.path() + ": tensor '" + name + "' of type " + std::string(model::dtype_name(t)) +
                                  " has rows of " + std::to_string(cols) + " values, not whole blocks of " +
                                  std::to_string(model::block_elements(t)));
    return stored_matrix(t, stored.bytes, rows, cols);
  }
};

// HF Falcon's new-architecture fused QKV interleaves per KV group: [q x G, k, v] x n_kv.
// Returns the [Q; K; V] concatenation that GGUF (and the 7B design) use.
WeightMatrix falcon_grouped_to_concat(const WeightMatrix& w, const model::Architecture& s) {
  const std::int64_t hd = s.head_dim, g = s.heads / s.kv_heads;
  WeightMatrix q, k, v;
  for (std::int64_t kv = 0; kv < s.kv_heads; ++kv) {
    const std::int64_t base = kv * (g + 2);
    append_rows(w, base * hd, g * hd, q);
    append_rows(w, (base + g) * hd, hd, k);
    append_rows(w, (base + g + 1) * hd, hd, v);
  }
  append_rows(k, 0, k.rows, q);
  append_rows(v, 0, v.rows, q);
  return q;
}

}  // namespace

std::size_t ModelWeights::bytes() const {
  std::size_t floats = out_norm.size() + out_norm_bias.size(), n = embed.bytes() + lm_head.bytes();
  for (const auto& l : layers) {
    floats += l.attn_norm.size() + l.attn_norm_bias.size() + l.mlp_norm.size() + l.mlp_norm_bias.size();
    n += l.wqkv.bytes() + l.wo.bytes() + l.w_up.bytes() + l.w_down.bytes();
  }
  return n + floats * sizeof(float);
}

std::size_t ModelWeights::matrix_bytes_per_step() const {
  std::size_t n = computes_logits() ? output_matrix().bytes() : 0;
  for (const auto& l : layers) n += l.wqkv.bytes() + l.wo.bytes() + l.w_up.bytes() + l.w_down.bytes();
  return n;
}

ModelWeights load_weights(const model::TensorSource& src, const model::Architecture& s, std::int32_t rank,
                          std::int32_t world, WeightStorage storage, std::uint32_t stage, std::uint32_t stages,
                          bool vocab_parallel) {
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("tensor parallel degree " + std::to_string(world) + ": rank " +
                                std::to_string(rank) + " out of range");
  ModelWeights w;
  w.spec = s;
  w.layout = model::read_weight_layout(src);
  w.rank = rank;
  w.world = world;
  w.storage = storage;
  w.first_layer = model::first_layer_of_stage(s, stages, stage);  // throws for a bad split
  w.stage = stage;
  w.stages = stages;
  const MatrixReader matrix{src, storage};
  w.heads = model::shard_for_rank(s, static_cast<std::uint32_t>(rank), static_cast<std::uint32_t>(world));
  const model::RankShard& p = w.heads;
  const Names n = names_for(s, w.layout);
  const std::int64_t h = s.hidden, hd = s.head_dim, v = s.vocab, f = s.ffn;
  const Shape vec{h};

  // The embedding: looked up by the first stage's ranks, and the tied output projection of the
  // ranks that compute logits; split by vocabulary rows with vocab_parallel.
  vocab_parallel = vocab_parallel && world > 1;  // one rank holds it all anyway
  w.vocab_parallel = vocab_parallel;
  std::int64_t vocab_rows = v;
  if (vocab_parallel) {
    w.vocab_first = std::int64_t(rank) * p.vocab_rows;
    vocab_rows = std::min<std::int64_t>(p.vocab_rows, v - w.vocab_first);
    if (vocab_rows <= 0)
      throw std::invalid_argument("a vocabulary of " + std::to_string(v) + " rows split over " + std::to_string(world) +
                                  " tensor ranks leaves rank " + std::to_string(rank) + " none");
  }
  const auto vocab_matrix = [&](const std::string& name) {
    WeightMatrix whole = matrix(name, v, h);
    if (!vocab_parallel) return whole;
    WeightMatrix mine;
    append_rows(whole, w.vocab_first, vocab_rows, mine);
    return mine;
  };
  const bool logits = rank == 0 || vocab_parallel;
  if (w.first_stage() || (w.last_stage() && s.tied_embeddings && logits)) w.embed = vocab_matrix(n.embed);
  if (w.last_stage()) {
    w.out_norm = src.read_f32(n.out_norm, vec);
    if (s.family == Family::falcon) w.out_norm_bias = src.read_f32(n.out_norm_bias, vec);
    if (!s.tied_embeddings && logits) w.lm_head = vocab_matrix(n.lm_head);
  }

  w.layers.resize(model::layers_of_stage(s, stages, stage));
  for (std::uint32_t j = 0; j < w.layers.size(); ++j) {
    LayerWeights& l = w.layers[static_cast<std::size_t>(j)];
    const std::string pre = n.layer_prefix + std::to_string(w.first_layer + j);
    l.attn_norm = src.read_f32(pre + n.attn_norm, vec);
    if (s.family == Family::falcon) l.attn_norm_bias = src.read_f32(pre + n.attn_norm_bias, vec);
    if (s.norms_per_layer == 2) l.mlp_norm = src.read_f32(pre + n.mlp_norm, vec);
    if (s.two_norms()) l.mlp_norm_bias = src.read_f32(pre + n.mlp_norm_bias, vec);

    WeightMatrix q, k, vv;
    const std::int64_t qrows = s.heads * hd, kvrows = s.kv_heads * hd;
    if (s.family == Family::llama) {
      q = matrix(pre + n.q, qrows, h);
      k = matrix(pre + n.k, kvrows, h);
      vv = matrix(pre + n.v, kvrows, h);
    } else {
      WeightMatrix qkv = matrix(pre + n.qkv, qrows + 2 * kvrows, h);
      if (w.layout.grouped_qkv) qkv = falcon_grouped_to_concat(qkv, s);
      append_rows(qkv, 0, qrows, q);
      append_rows(qkv, qrows, kvrows, k);
      append_rows(qkv, qrows + kvrows, kvrows, vv);
    }
    append_rows(q, p.q_begin * hd, p.q_heads * hd, l.wqkv);
    append_rows(k, p.kv_begin * hd, p.kv_heads * hd, l.wqkv);
    append_rows(vv, p.kv_begin * hd, p.kv_heads * hd, l.wqkv);
    l.wo = column_slice(matrix(pre + n.o, h, qrows), p.q_begin * hd, p.q_heads * hd);

    if (s.family == Family::llama) {
      append_rows(matrix(pre + n.gate, f, h), p.ffn_begin, p.ffn_columns, l.w_up);
      append_rows(matrix(pre + n.up, f, h), p.ffn_begin, p.ffn_columns, l.w_up);
    } else {
      append_rows(matrix(pre + n.up, f, h), p.ffn_begin, p.ffn_columns, l.w_up);
    }
    l.w_down = column_slice(matrix(pre + n.down, h, f), p.ffn_begin, p.ffn_columns);
  }
  // The integer matrices in the layout their kernels read, once every slice and join is done.
  group_rows(w.embed);
  group_rows(w.lm_head);
  for (LayerWeights& l : w.layers)
    for (WeightMatrix* m : {&l.wqkv, &l.wo, &l.w_up, &l.w_down}) group_rows(*m);
  return w;
}

}  // namespace actorlm::kernels::cpu
