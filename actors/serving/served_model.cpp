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

ServedModel::ServedModel(caf::actor_system& sys, const config::Config& cfg)
    : max_model_len_(static_cast<std::uint32_t>(cfg.model.max_model_len)) {
  engine::KvCapacity capacity;
  engine::ShardFactory factory;
  switch (cfg.engine.backend) {
    case config::Backend::cpu: load_cpu(cfg); capacity = backend_->capacity; factory = backend_->factory; break;
    case config::Backend::sim: load_sim(cfg, capacity, factory); break;
    case config::Backend::cuda:
      throw std::invalid_argument("engine.backend = \"cuda\" cannot serve a model yet; use \"cpu\" or \"sim\"");
  }
  vocab_size_ = capacity.vocab_size;
  engine_ = std::make_unique<engine::Engine>(sys, cfg, capacity, factory);
}

void ServedModel::load_cpu(const config::Config& cfg) {
  backend_.emplace(shard::load_cpu_backend(cfg));
  model::Vocabulary vocab = load_vocabulary(*backend_);
  const std::string arch = backend_->spec.arch == kernels::cpu::Arch::llama ? "llama" : "falcon";
  chat_format_ = model::select_chat_format(vocab.chat_template, arch);
  const std::string system = model::default_system_message(vocab.chat_template);
  tokenizer_ = std::make_unique<model::Tokenizer>(std::move(vocab));
  // A model may pad its embeddings past the tokenizer (harmless: those ids have no text), but
  // a tokenizer larger than the model would feed it ids it has no embedding for.
  if (tokenizer_->size() > static_cast<std::size_t>(backend_->spec.vocab))
    throw std::invalid_argument(backend_->model_path + ": the tokenizer has " + std::to_string(tokenizer_->size()) +
                                " tokens but the model's vocabulary only " + std::to_string(backend_->spec.vocab));
  const auto& v = tokenizer_->vocabulary();
  if (v.eos >= 0) stop_tokens_.push_back(v.eos);
  for (std::size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& t = v.tokens[id];
    if (tokenizer_->is_special(static_cast<model::Token>(id)) &&
        (t == "<|im_end|>" || t == "<|eot_id|>" || t == "<|endoftext|>" || t == "<|end_of_text|>") &&
        std::find(stop_tokens_.begin(), stop_tokens_.end(), id) == stop_tokens_.end())
      stop_tokens_.push_back(static_cast<model::Token>(id));
  }
  codec_ = make_tokenizer_codec(*tokenizer_, chat_format_, system);
  description_ = backend_->model_path + " on the cpu backend, tensor parallel " +
                 std::to_string(cfg.engine.tensor_parallel_degree) + ", KV cache " +
                 std::to_string(std::uint64_t(backend_->capacity.device_blocks) * cfg.cache.block_size) + " tokens";
}

const model::Tokenizer& ServedModel::tokenizer() const {
  if (!tokenizer_) throw std::logic_error("ServedModel::tokenizer: this backend has no tokenizer");
  return *tokenizer_;
}

const shard::CpuBackend& ServedModel::backend() const {
  if (!backend_) throw std::logic_error("ServedModel::backend: not the cpu backend");
  return *backend_;
}

ServedModel::~ServedModel() = default;

std::vector<model::Token> ServedModel::chat_prompt(const std::vector<model::ChatMessage>& messages) const {
  return codec_->chat_prompt(messages);
}

std::vector<model::Token> ServedModel::raw_prompt(std::string_view text) const {
  return codec_->raw_prompt(text);
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
