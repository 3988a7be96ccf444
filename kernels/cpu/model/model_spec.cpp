#include "kernels/cpu/model/model_spec.hpp"

#include "model/format/gguf_file.hpp"
#include "model/format/safetensors_file.hpp"

#include <nlohmann/json.hpp>

#include <sstream>

namespace actorlm::kernels::cpu {

namespace {

using model::ModelFileError;

[[noreturn]] void fail(const model::TensorSource& src, const std::string& what) {
  throw ModelFileError(src.path() + ": " + what);
}

std::int32_t positive(const model::TensorSource& src, const std::string& key, std::int64_t v) {
  if (v <= 0 || v > (std::int64_t{1} << 30))
    fail(src, key + ": expected a positive count, found " + std::to_string(v));
  return static_cast<std::int32_t>(v);
}

ModelSpec from_gguf(const model::GgufFile& f) {
  ModelSpec s;
  s.format = CheckpointFormat::gguf;
  const auto arch = f.get_string("general.architecture");
  if (!arch) fail(f, "general.architecture: missing");
  if (*arch == "llama") s.arch = Arch::llama;
  else if (*arch == "falcon") s.arch = Arch::falcon;
  else fail(f, "general.architecture: unsupported architecture '" + *arch + "' (llama, falcon)");
  const std::string a = *arch + ".";
  auto need_int = [&](const std::string& key) {
    auto v = f.get_int(a + key);
    if (!v) fail(f, a + key + ": missing");
    return positive(f, a + key, *v);
  };
  s.n_layers = need_int("block_count");
  s.hidden = need_int("embedding_length");
  s.n_heads = need_int("attention.head_count");
  s.n_kv_heads = positive(f, a + "attention.head_count_kv",
                          f.get_int(a + "attention.head_count_kv").value_or(s.n_heads));
  s.ffn = f.get_int(a + "feed_forward_length") ? need_int("feed_forward_length")
                                                : positive(f, a + "embedding_length x 4", 4 * std::int64_t(s.hidden));
  if (auto ctx = f.get_int(a + "context_length")) s.max_position = *ctx;
  if (s.arch == Arch::llama) {
    s.norm_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
    s.rope_style = RopeStyle::interleaved;  // convert_hf_to_gguf permutes Llama's Q/K rows
  } else {
    s.norm_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_epsilon").value_or(1e-5));
    s.rope_style = RopeStyle::halves;
    s.parallel_block = true;
    s.two_norms = f.find("blk.0.attn_norm_2.weight") != nullptr;
  }
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
    if (s.hidden % s.n_heads)
      fail(f, a + "embedding_length " + std::to_string(s.hidden) + " is not a multiple of the " +
                  std::to_string(s.n_heads) + " attention heads (and no attention.key_length)");
    s.head_dim = s.hidden / s.n_heads;
  }
  if (f.find("rope_freqs.weight"))
    fail(f, "tensor 'rope_freqs.weight': per-dimension RoPE frequency factors (Llama 3.1 style) are "
            "not supported");
  if (auto rd = f.get_int(a + "rope.dimension_count"); rd && *rd != s.head_dim)
    fail(f, a + "rope.dimension_count: partial rotary (" + std::to_string(*rd) +
                " of head dim " + std::to_string(s.head_dim) + ") is not supported");
  const model::TensorInfo* emb = f.find("token_embd.weight");
  if (!emb || emb->shape.size() != 2) fail(f, "tensor 'token_embd.weight': missing or not 2-D");
  s.vocab = positive(f, "token_embd.weight rows", emb->shape[0]);
  if (auto v = f.get_int(a + "vocab_size"); v && *v != s.vocab)
    fail(f, a + "vocab_size: " + std::to_string(*v) + " but token_embd.weight has " +
                std::to_string(s.vocab) + " rows");
  s.tied_embeddings = f.find("output.weight") == nullptr;
  s.bos = static_cast<std::int32_t>(f.get_int("tokenizer.ggml.bos_token_id").value_or(-1));
  s.eos = static_cast<std::int32_t>(f.get_int("tokenizer.ggml.eos_token_id").value_or(-1));
  return s;
}

template <class T>
T get_or(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

ModelSpec from_hf(const model::SafetensorsModel& m) {
  const nlohmann::json& c = m.config();
  ModelSpec s;
  s.format = CheckpointFormat::safetensors;
  s.rope_style = RopeStyle::halves;
  try {
    const std::string type = get_or<std::string>(c, "model_type", "");
    if (type == "llama" || type == "mistral") {
      s.arch = Arch::llama;
      s.n_layers = c.at("num_hidden_layers").get<std::int32_t>();
      s.hidden = c.at("hidden_size").get<std::int32_t>();
      s.n_heads = c.at("num_attention_heads").get<std::int32_t>();
      s.n_kv_heads = get_or<std::int32_t>(c, "num_key_value_heads", s.n_heads);
      s.ffn = c.at("intermediate_size").get<std::int32_t>();
      s.norm_eps = get_or<float>(c, "rms_norm_eps", 1e-6f);
      s.tied_embeddings = get_or<bool>(c, "tie_word_embeddings", false);
      for (const char* key : {"attention_bias", "mlp_bias"})
        if (get_or<bool>(c, key, false)) fail(m, std::string("config.json: ") + key + ": biases are not supported");
      if (auto it = c.find("sliding_window"); it != c.end() && !it->is_null() &&
          it->get<std::int64_t>() < get_or<std::int64_t>(c, "max_position_embeddings", 2048))
        fail(m, "config.json: sliding_window: sliding-window attention is not supported");
    } else if (type == "falcon") {
      s.arch = Arch::falcon;
      s.n_layers = c.contains("num_hidden_layers") ? c.at("num_hidden_layers").get<std::int32_t>()
                                                   : c.at("n_layer").get<std::int32_t>();
      s.hidden = c.at("hidden_size").get<std::int32_t>();
      s.n_heads = c.contains("num_attention_heads") ? c.at("num_attention_heads").get<std::int32_t>()
                                                    : c.at("n_head").get<std::int32_t>();
      const bool new_arch = get_or<bool>(c, "new_decoder_architecture", false);
      const bool mq = get_or<bool>(c, "multi_query", true);
      if (get_or<bool>(c, "alibi", false)) fail(m, "config.json: alibi: not supported (rotary only)");
      if (get_or<bool>(c, "bias", false)) fail(m, "config.json: bias: linear biases are not supported");
      if (!new_arch && !mq)
        fail(m, "config.json: falcon without multi_query or new_decoder_architecture is not supported");
      if (!new_arch && !get_or<bool>(c, "parallel_attn", true))
        fail(m, "config.json: parallel_attn: sequential falcon blocks are not supported");
      s.n_kv_heads = new_arch ? get_or<std::int32_t>(c, "num_kv_heads", s.n_heads) : 1;
      s.ffn = get_or<std::int32_t>(c, "ffn_hidden_size", 0);
      if (s.ffn == 0 && s.hidden > 0 && s.hidden <= (1 << 28)) s.ffn = 4 * s.hidden;
      s.grouped_qkv = new_arch;
      s.norm_eps = get_or<float>(c, "layer_norm_epsilon", 1e-5f);
      s.parallel_block = true;
      s.two_norms = new_arch && get_or<std::int32_t>(c, "num_ln_in_parallel_attn", 2) == 2;
      s.tied_embeddings = get_or<bool>(c, "tie_word_embeddings", true);
    } else {
      fail(m, "config.json: model_type: unsupported '" + type + "' (llama, falcon)");
    }
    s.vocab = c.at("vocab_size").get<std::int32_t>();
    s.head_dim = get_or<std::int32_t>(c, "head_dim", s.hidden / std::max(1, s.n_heads));
    s.rope_theta = get_or<float>(c, "rope_theta", 10000.0f);
    s.max_position = get_or<std::int64_t>(c, "max_position_embeddings", 2048);
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
    s.bos = id("bos_token_id");
    s.eos = id("eos_token_id");
  } catch (const nlohmann::json::exception& e) {
    fail(m, std::string("config.json: ") + e.what());
  }
  if (s.n_layers <= 0 || s.hidden <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.ffn <= 0 ||
      s.vocab <= 0 || s.head_dim <= 0)
    fail(m, "config.json: sizes must be positive (" + s.describe() + ")");
  return s;
}

void check(const model::TensorSource& src, const ModelSpec& s) {
  if (s.n_heads % s.n_kv_heads != 0)
    fail(src, "attention heads (" + std::to_string(s.n_heads) + ") are not a multiple of KV heads (" +
                  std::to_string(s.n_kv_heads) + ")");
  if (s.head_dim % 2 != 0) fail(src, "head dimension " + std::to_string(s.head_dim) + " is odd");
  if (s.rope_linear_factor <= 0) fail(src, "rope scaling factor must be positive");
}

}  // namespace

ModelSpec read_model_spec(const model::TensorSource& source) {
  ModelSpec s;
  if (auto* g = dynamic_cast<const model::GgufFile*>(&source)) s = from_gguf(*g);
  else if (auto* m = dynamic_cast<const model::SafetensorsModel*>(&source)) s = from_hf(*m);
  else fail(source, "a model needs a GGUF file or a folder with config.json and safetensors");
  check(source, s);
  return s;
}

std::string ModelSpec::describe() const {
  std::ostringstream o;
  o << (arch == Arch::llama ? "llama" : "falcon") << ": " << n_layers << " layers, hidden " << hidden
    << ", heads " << n_heads << "/" << n_kv_heads << " kv, head_dim " << head_dim << ", ffn " << ffn
    << ", vocab " << vocab << (tied_embeddings ? ", tied embeddings" : "")
    << (two_norms ? ", two layer norms" : "") << ", rope theta " << rope_theta;
  return o.str();
}

std::int64_t ModelSpec::parameter_count() const {
  const std::int64_t h = hidden, hd = head_dim;
  const std::int64_t attn = h * (n_heads * hd) + 2 * h * (n_kv_heads * hd) + (n_heads * hd) * h;
  const std::int64_t mlp = (arch == Arch::llama ? 3 : 2) * h * std::int64_t(ffn);
  const std::int64_t norm_params = arch == Arch::llama ? h : 2 * h;  // falcon LayerNorm has a bias
  const std::int64_t norms = (arch == Arch::llama || two_norms ? 2 : 1) * norm_params;
  const std::int64_t embed = std::int64_t(vocab) * h * (tied_embeddings ? 1 : 2);
  return n_layers * (attn + mlp + norms) + embed + norm_params;
}

}  // namespace actorlm::kernels::cpu
