#include "actors/serving/served_model.hpp"

#include "actors/kv/block_manager_protocol.hpp"
#include "actors/shard/shard_protocol.hpp"
#include "model/format/gguf_file.hpp"
#include "model/format/safetensors_file.hpp"

#include <caf/actor_system_config.hpp>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace actorlm::serving {

namespace {

model::Vocabulary load_vocabulary(const shard::CpuBackend& b) {
  if (auto* g = dynamic_cast<const model::GgufFile*>(b.source.get())) return model::vocabulary_from_gguf(*g);
  const auto json = std::filesystem::path(b.model_path) / "tokenizer.json";
  if (!std::filesystem::exists(json))
    throw std::runtime_error(b.model_path + ": no tokenizer.json next to the safetensors checkpoint");
  return model::vocabulary_from_tokenizer_json(json.string());
}

}  // namespace

void register_engine_types(caf::actor_system_config& cfg) {
  kv::add_block_manager_types(cfg);
  shard::add_shard_types(cfg);
}

namespace {
const config::Config& require_cpu(const config::Config& cfg) {
  if (cfg.engine.backend != config::Backend::cpu)
    throw std::invalid_argument("engine.backend = \"" + std::string(config::to_string(cfg.engine.backend)) +
                                "\" cannot serve a model yet; only \"cpu\" can");
  return cfg;
}
}  // namespace

ServedModel::ServedModel(caf::actor_system& sys, const config::Config& cfg)
    : backend_(shard::load_cpu_backend(require_cpu(cfg))) {
  model::Vocabulary vocab = load_vocabulary(backend_);
  const std::string arch = backend_.spec.arch == kernels::cpu::Arch::llama ? "llama" : "falcon";
  chat_format_ = model::select_chat_format(vocab.chat_template, arch);
  default_system_ = model::default_system_message(vocab.chat_template);
  tokenizer_ = std::make_unique<model::Tokenizer>(std::move(vocab));
  // A model may pad its embeddings past the tokenizer (harmless: those ids have no text), but
  // a tokenizer larger than the model would feed it ids it has no embedding for.
  if (tokenizer_->size() > static_cast<std::size_t>(backend_.spec.vocab))
    throw std::invalid_argument(backend_.model_path + ": the tokenizer has " + std::to_string(tokenizer_->size()) +
                                " tokens but the model's vocabulary only " + std::to_string(backend_.spec.vocab));
  const auto& v = tokenizer_->vocabulary();
  if (v.eos >= 0) stop_tokens_.push_back(v.eos);
  for (std::size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& t = v.tokens[id];
    if (tokenizer_->is_special(static_cast<model::Token>(id)) &&
        (t == "<|im_end|>" || t == "<|eot_id|>" || t == "<|endoftext|>" || t == "<|end_of_text|>") &&
        std::find(stop_tokens_.begin(), stop_tokens_.end(), id) == stop_tokens_.end())
      stop_tokens_.push_back(static_cast<model::Token>(id));
  }
  engine_ = std::make_unique<engine::Engine>(sys, cfg, backend_.capacity, backend_.factory);
}

ServedModel::~ServedModel() = default;

std::vector<model::Token> ServedModel::chat_prompt(const std::vector<model::ChatMessage>& messages) const {
  return tokenizer_->encode(model::render_chat(chat_format_, messages, true, default_system_), true);
}

std::vector<model::Token> ServedModel::raw_prompt(std::string_view text) const {
  std::vector<model::Token> out;
  const auto& v = tokenizer_->vocabulary();
  if (v.add_bos && v.bos >= 0) out.push_back(v.bos);
  const auto body = tokenizer_->encode(text, false);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

scheduler::RequestSpec ServedModel::request(scheduler::RequestId id, std::vector<model::Token> prompt,
                                            std::uint32_t max_tokens) const {
  scheduler::RequestSpec s;
  s.id = id;
  s.prompt = std::move(prompt);
  s.max_tokens = max_tokens;
  s.stop_token_ids = stop_tokens_;
  s.sampling.temperature = 0.0f;
  return s;
}

}  // namespace actorlm::serving
