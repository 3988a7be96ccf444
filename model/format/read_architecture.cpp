#include "model/format/read_architecture.hpp"

#include "model/format/gguf_file.hpp"
#include "model/format/safetensors_file.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace actorlm::model {

namespace {

struct Read {
  Architecture arch;
  WeightLayout layout;
};

[[noreturn]] void fail(const TensorSource& src, const std::string& what) {
  throw ModelFileError(src.path() + ": " + what);
}

std::uint32_t positive(const TensorSource& src, const std::string& key, std::int64_t v) {
  if (v <= 0 || v > (std::int64_t{1} << 30))
    fail(src, key + ": expected a positive count, found " + std::to_string(v));
  return static_cast<std::uint32_t>(v);
}

// The fixed block design of each family (model::problems() checks the same rules).
void set_family(Architecture& a, Family f, bool two_norms) {
  a.family = f;
  a.norm = f == Family::llama ? NormKind::rmsnorm : NormKind::layernorm;
  a.ffn_kind = f == Family::llama ? FfnKind::swiglu : FfnKind::gelu;
  a.parallel_attention = f == Family::falcon;
  a.norms_per_layer = f == Family::llama || two_norms ? 2 : 1;
}

Read from_gguf(const GgufFile& f) {
  Read r;
  Architecture& s = r.arch;
  r.layout.format = CheckpointFormat::gguf;
  const auto arch = f.get_string("general.architecture");
  if (!arch) fail(f, "general.architecture: missing");
  const std::string a = *arch + ".";
  if (*arch == "llama") {
    set_family(s, Family::llama, false);
    r.layout.rope_style = RopeStyle::interleaved;  // convert_hf_to_gguf permutes Llama's Q/K rows
  } else if (*arch == "falcon") {
    set_family(s, Family::falcon, f.find("blk.0.attn_norm_2.weight") != nullptr);
    r.layout.rope_style = RopeStyle::halves;
  } else {
    fail(f, "general.architecture: unsupported architecture '" + *arch + "' (llama, falcon)");
  }
  auto need_int = [&](const std::string& key) {
    auto v = f.get_int(a + key);
    if (!v) fail(f, a + key + ": missing");
    return positive(f, a + key, *v);
  };
  s.layers = need_int("block_count");
  s.hidden = need_int("embedding_length");
  s.heads = need_int("attention.head_count");
  s.kv_heads = positive(f, a + "attention.head_count_kv",
                        f.get_int(a + "attention.head_count_kv").value_or(s.heads));
  s.ffn = f.get_int(a + "feed_forward_length") ? need_int("feed_forward_length")
                                                : positive(f, a + "embedding_length x 4", 4 * std::int64_t(s.hidden));
  // llama.cpp's own default when a file does not say.
  s.max_context = positive(f, a + "context_length", f.get_int(a + "context_length").value_or(2048));
  const char* eps_key = s.family == Family::llama ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon";
  s.norm_eps = static_cast<float>(f.get_float(a + eps_key).value_or(1e-5));
  s.rope_theta = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
  if (auto type = f.get_string(a + "rope.scaling.type"); type && *type != "none") {
    if (*type != "linear") fail(f, a + "rope.scaling.type: unsupported '" + *type + "' (linear)");
    s.rope_linear_factor = static_cast<float>(f.get_float(a + "rope.scaling.factor").value_or(1.0));
  }
  if (auto kl = f.get_int(a + "attention.key_length")) {
    s.head_dim = positive(f, a + "attention.key_length", *kl);
    if (auto vl = f.get_int(a + "attention.value_length"); vl && *vl != *kl)
      fail(f, a + "attention.value_length: differs from key_length (not supported)");
  } else {
    if (s.hidden % s.heads)
      fail(f, a + "embedding_length " + std::to_string(s.hidden) + " is not a multiple of the " +
                  std::to_string(s.heads) + " attention heads (and no attention.key_length)");
    s.head_dim = s.hidden / s.heads;
  }
  if (f.find("rope_freqs.weight"))
    fail(f, "tensor 'rope_freqs.weight': per-dimension RoPE frequency factors (Llama 3.1 style) are "
            "not supported");
  if (auto rd = f.get_int(a + "rope.dimension_count"); rd && *rd != s.head_dim)
    fail(f, a + "rope.dimension_count: partial rotary (" + std::to_string(*rd) +
                " of head dim " + std::to_string(s.head_dim) + ") is not supported");
  const TensorInfo* emb = f.find("token_embd.weight");
  if (!emb || emb->shape.size() != 2) fail(f, "tensor 'token_embd.weight': missing or not 2-D");
  s.vocab = positive(f, "token_embd.weight rows", emb->shape[0]);
  if (auto v = f.get_int(a + "vocab_size"); v && *v != s.vocab)
    fail(f, a + "vocab_size: " + std::to_string(*v) + " but token_embd.weight has " +
                std::to_string(s.vocab) + " rows");
  s.tied_embeddings = f.find("output.weight") == nullptr;
  s.bos_token_id = static_cast<std::int32_t>(f.get_int("tokenizer.ggml.bos_token_id").value_or(-1));
  s.eos_token_id = static_cast<std::int32_t>(f.get_int("tokenizer.ggml.eos_token_id").value_or(-1));
  return r;
}

template <class T>
T get_or(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

// A count from config.json: positive and at most 2^30 (0 stays 0 for problems() to name).
std::uint32_t count(const TensorSource& src, const char* key, std::int64_t v) {
  if (v < 0 || v > (std::int64_t{1} << 30))
    fail(src, std::string("config.json: ") + key + ": expected a positive count, found " + std::to_string(v));
  return static_cast<std::uint32_t>(v);
}

// HF Llama/Mistral config.json keys.
void read_hf_llama(const SafetensorsModel& m, const nlohmann::json& c, Architecture& s) {
  set_family(s, Family::llama, false);
  s.layers = count(m, "num_hidden_layers", c.at("num_hidden_layers").get<std::int64_t>());
  s.hidden = count(m, "hidden_size", c.at("hidden_size").get<std::int64_t>());
  s.heads = count(m, "num_attention_heads", c.at("num_attention_heads").get<std::int64_t>());
  s.kv_heads = count(m, "num_key_value_heads", get_or<std::int64_t>(c, "num_key_value_heads", s.heads));
  s.ffn = count(m, "intermediate_size", c.at("intermediate_size").get<std::int64_t>());
  s.norm_eps = get_or<float>(c, "rms_norm_eps", 1e-6f);
  s.tied_embeddings = get_or<bool>(c, "tie_word_embeddings", false);
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (get_or<bool>(c, key, false)) fail(m, std::string("config.json: ") + key + ": biases are not supported");
  if (auto it = c.find("sliding_window"); it != c.end() && !it->is_null() &&
      it->get<std::int64_t>() < get_or<std::int64_t>(c, "max_position_embeddings", 2048))
    fail(m, "config.json: sliding_window: sliding-window attention is not supported");
}

// HF Falcon config.json keys (both the 7B "multi_query" and the 40B "new_decoder_architecture").
void read_hf_falcon(const SafetensorsModel& m, const nlohmann::json& c, Read& r) {
  Architecture& s = r.arch;
  const bool new_arch = get_or<bool>(c, "new_decoder_architecture", false);
  const bool mq = get_or<bool>(c, "multi_query", true);
  if (get_or<bool>(c, "alibi", false)) fail(m, "config.json: alibi: not supported (rotary only)");
  if (get_or<bool>(c, "bias", false)) fail(m, "config.json: bias: linear biases are not supported");
  if (!new_arch && !mq)
    fail(m, "config.json: falcon without multi_query or new_decoder_architecture is not supported");
  if (!new_arch && !get_or<bool>(c, "parallel_attn", true))
    fail(m, "config.json: parallel_attn: sequential falcon blocks are not supported");
  set_family(s, Family::falcon, new_arch && get_or<std::int32_t>(c, "num_ln_in_parallel_attn", 2) == 2);
  s.layers = count(m, "num_hidden_layers", c.contains("num_hidden_layers") ? c.at("num_hidden_layers").get<std::int64_t>()
                                                                           : c.at("n_layer").get<std::int64_t>());
  s.hidden = count(m, "hidden_size", c.at("hidden_size").get<std::int64_t>());
  s.heads = count(m, "num_attention_heads", c.contains("num_attention_heads") ? c.at("num_attention_heads").get<std::int64_t>()
                                                                              : c.at("n_head").get<std::int64_t>());
  s.kv_heads = new_arch ? count(m, "num_kv_heads", get_or<std::int64_t>(c, "num_kv_heads", s.heads)) : 1;
  const std::int64_t ffn = get_or<std::int64_t>(c, "ffn_hidden_size", 0);  // absent or 0: 4 x hidden
  s.ffn = count(m, "ffn_hidden_size", ffn != 0 ? ffn : 4 * std::int64_t{s.hidden});
  r.layout.grouped_qkv = new_arch;
  s.norm_eps = get_or<float>(c, "layer_norm_epsilon", 1e-5f);
  s.tied_embeddings = get_or<bool>(c, "tie_word_embeddings", true);
}

Read from_hf(const SafetensorsModel& m) {
  const nlohmann::json& c = m.config();
  Read r;
  Architecture& s = r.arch;
  r.layout.format = CheckpointFormat::safetensors;
  r.layout.rope_style = RopeStyle::halves;
  try {
    const std::string type = get_or<std::string>(c, "model_type", "");
    if (type == "llama" || type == "mistral") read_hf_llama(m, c, s);
    else if (type == "falcon") read_hf_falcon(m, c, r);
    else fail(m, "config.json: model_type: unsupported '" + type + "' (llama, falcon)");
    s.vocab = count(m, "vocab_size", c.at("vocab_size").get<std::int64_t>());
    s.head_dim = count(m, "head_dim", get_or<std::int64_t>(c, "head_dim", s.hidden / std::max(1u, s.heads)));
    s.rope_theta = get_or<float>(c, "rope_theta", 10000.0f);
    s.max_context = count(m, "max_position_embeddings", get_or<std::int64_t>(c, "max_position_embeddings", 2048));
    // transformers < 5 writes rope_theta and rope_scaling; 5.x writes rope_parameters.
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
      auto it = c.find(key);
      if (it == c.end() || it->is_null()) continue;
      s.rope_theta = get_or<float>(*it, "rope_theta", s.rope_theta);
      const std::string kind = get_or<std::string>(*it, "rope_type", get_or<std::string>(*it, "type", "default"));
      if (kind == "default") continue;
      if (kind != "linear")
        fail(m, std::string("config.json: ") + key + ": unsupported type '" + kind + "' (linear)");
      s.rope_linear_factor = it->at("factor").get<float>();
    }
    auto id = [&](const char* key) -> std::int32_t {
      auto it = c.find(key);
      if (it == c.end() || it->is_null()) return -1;
      if (it->is_array()) return it->empty() ? -1 : it->front().get<std::int32_t>();
      return it->get<std::int32_t>();
    };
    s.bos_token_id = id("bos_token_id");
    s.eos_token_id = id("eos_token_id");
  } catch (const nlohmann::json::exception& e) {
    fail(m, std::string("config.json: ") + e.what());
  }
  return r;
}

Read read(const TensorSource& source) {
  Read r;
  if (auto* g = dynamic_cast<const GgufFile*>(&source)) r = from_gguf(*g);
  else if (auto* m = dynamic_cast<const SafetensorsModel*>(&source)) r = from_hf(*m);
  else fail(source, "a model needs a GGUF file or a folder with config.json and safetensors");
  if (const auto wrong = problems(r.arch); !wrong.empty())
    fail(source, to_string(wrong) + " (" + r.arch.describe() + ")");
  return r;
}

}  // namespace

Architecture read_architecture(const TensorSource& source) { return read(source).arch; }

WeightLayout read_weight_layout(const TensorSource& source) { return read(source).layout; }

}  // namespace actorlm::model
