#pragma once
// The one description of a decoder-only transformer that every backend and the simulator share:
// its shapes, its block design and its special tokens. The cpu backend fills it from a
// checkpoint's metadata (model/format/read_architecture.hpp), the simulator's catalogue from
// configs/catalogue/models.toml; how it splits over tensor-parallel ranks is in sharding.hpp.
// Plain C++: no CAF, no file formats.
//
// Two families are implemented by the cpu backend:
//   llama:  RMSNorm before attention and before the MLP, sequential attention then MLP, SwiGLU
//           MLP (gate, up, down), rotary, grouped-query attention.
//   falcon: LayerNorm (weight + bias), attention and MLP in parallel on the same input (one
//           residual add), GELU MLP (up, down), rotary, multi-query or grouped KV heads; the
//           40B design has separate attention and MLP norms (ln_attn, ln_mlp).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::model {

enum class Family : std::uint8_t { llama, falcon };
enum class FfnKind : std::uint8_t { gelu, swiglu };       // 2 matrices (up, down) | 3 (gate, up, down)
enum class NormKind : std::uint8_t { layernorm, rmsnorm };  // weight + bias | weight

std::string_view to_string(Family);
std::string_view to_string(FfnKind);
std::string_view to_string(NormKind);

struct Architecture {
  Family family = Family::llama;
  std::uint32_t layers = 0;
  std::uint32_t hidden = 0;    // d_model
  std::uint32_t heads = 0;     // query heads
  std::uint32_t kv_heads = 0;  // K/V heads (< heads: grouped or multi-query attention)
  std::uint32_t head_dim = 0;  // usually hidden / heads
  std::uint32_t ffn = 0;       // MLP intermediate width
  FfnKind ffn_kind = FfnKind::swiglu;
  std::uint32_t vocab = 0;
  NormKind norm = NormKind::rmsnorm;
  float norm_eps = 1e-5f;
  // 2: one norm before attention and one before the MLP (llama; falcon-40B's ln_attn, ln_mlp);
  // 1: one input norm feeds both parallel branches (falcon-7B). The final norm is extra.
  std::uint32_t norms_per_layer = 2;
  float rope_theta = 10000.0f;
  float rope_linear_factor = 1.0f;  // positions are divided by it (linear RoPE scaling)
  bool parallel_attention = false;  // attention and MLP read the same input, summed: one
                                    // all-reduce per layer under tensor parallelism, not two
  bool tied_embeddings = false;     // the LM head is the token embedding
  std::uint32_t max_context = 0;    // longest sequence the model was trained for (positions)
  std::int32_t bos_token_id = -1;   // -1: none
  std::int32_t eos_token_id = -1;

  // Falcon-40B's design: separate attention and MLP LayerNorms over the same input.
  bool two_norms() const { return family == Family::falcon && norms_per_layer == 2; }
  std::uint32_t ffn_matrices() const { return ffn_kind == FfnKind::gelu ? 2 : 3; }
  std::uint64_t norm_params() const { return norm == NormKind::layernorm ? 2ull * hidden : hidden; }
  // Parameters of one decoder layer: Q, K, V, output projection, MLP, norms (no linear biases).
  std::uint64_t layer_params() const;
  // Token embedding, plus the LM head when it is not tied.
  std::uint64_t embedding_params() const;
  // The whole model, tied weights counted once: layers, embeddings, final norm.
  std::uint64_t params() const;

  std::string describe() const;  // one line for logs

  friend bool operator==(const Architecture&, const Architecture&) = default;
};

// One thing wrong with a description: the member (spelled as the catalogue's TOML key) and why.
struct ArchitectureProblem {
  std::string field;    // "kv_heads"
  std::string message;  // "must divide heads (9), found 2"
};
// Everything wrong with a description (empty when none): sizes must be positive, heads a
// multiple of kv_heads, head_dim even (rotary rotates pairs), eps/theta/factor positive, and the
// family's fixed design (norm kind, MLP kind, block layout) respected. Readers add their file
// and position.
std::vector<ArchitectureProblem> problems(const Architecture&);
// "field: message; field: message".
std::string to_string(const std::vector<ArchitectureProblem>&);

// How a checkpoint stores the weights of an Architecture. Not part of the architecture: the same
// network reads differently from a GGUF file and from an HF safetensors folder.
enum class CheckpointFormat : std::uint8_t { gguf, safetensors };
// How rotary embeddings pair the dimensions of a head: GGUF Llama checkpoints permute Q/K rows so
// that pairs are adjacent (2i, 2i+1); HF checkpoints (and GGUF Falcon) rotate halves
// (i, i + head_dim/2).
enum class RopeStyle : std::uint8_t { interleaved, halves };

struct WeightLayout {
  CheckpointFormat format = CheckpointFormat::gguf;
  RopeStyle rope_style = RopeStyle::halves;
  bool grouped_qkv = false;  // HF falcon new_decoder_architecture: fused QKV rows interleaved per
                             // KV group ([q x G, k, v] x kv_heads) instead of [Q; K; V]
};

}  // namespace actorlm::model
