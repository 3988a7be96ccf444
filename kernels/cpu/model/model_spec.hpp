#pragma once
// The architecture hyper-parameters of a decoder-only model, read from a checkpoint's metadata
// (GGUF keys or HF config.json). Two families: Llama (RMSNorm, rotary, grouped-query attention,
// SwiGLU) and Falcon (LayerNorm, rotary, parallel attention + GELU MLP, multi-query or grouped
// KV heads; the 40B "new decoder architecture" has separate attention and MLP LayerNorms).

#include <cstdint>
#include <string>

namespace actorlm::model { class TensorSource; }

namespace actorlm::kernels::cpu {

enum class Arch { llama, falcon };

// How rotary embeddings pair the dimensions of a head: GGUF Llama checkpoints permute Q/K rows
// so that pairs are adjacent (2i, 2i+1); HF checkpoints (and GGUF Falcon) rotate halves
// (i, i + head_dim/2).
enum class RopeStyle { interleaved, halves };

enum class CheckpointFormat { gguf, safetensors };

struct ModelSpec {
  Arch arch = Arch::llama;
  CheckpointFormat format = CheckpointFormat::gguf;
  std::int32_t n_layers = 0;
  std::int32_t hidden = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
  std::int32_t ffn = 0;          // intermediate size
  std::int32_t vocab = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float rope_linear_factor = 1.0f;  // positions are divided by it (linear RoPE scaling)
  RopeStyle rope_style = RopeStyle::halves;
  bool tied_embeddings = false;  // the output projection is the token embedding
  bool parallel_block = false;   // falcon: attention and MLP read the same input, one residual add
  bool two_norms = false;        // falcon 40B design: ln_attn and ln_mlp
  bool grouped_qkv = false;      // HF falcon new_decoder_architecture: fused QKV rows interleaved
                                 // per KV group ([q x G, k, v] x n_kv) instead of [Q; K; V]
  std::int64_t max_position = 2048;
  std::int32_t bos = -1;
  std::int32_t eos = -1;

  std::string describe() const;  // one line for logs
  // Parameters of the whole model (embeddings counted once when tied).
  std::int64_t parameter_count() const;
};

// Reads the spec from a GgufFile or SafetensorsModel (dispatching on the dynamic type) and
// checks it against the tensors present. Throws model::ModelFileError naming the file and key.
ModelSpec read_model_spec(const model::TensorSource& source);

}  // namespace actorlm::kernels::cpu
