#pragma once
// A model being served: the engine (scheduler, block manager, shard actors of the configured
// backend) plus the model's tokenizer and chat format. What the CLI, the benchmarks and the
// HTTP front end put requests through.

#include "actors/config/config.hpp"
#include "actors/engine/engine.hpp"
#include "actors/serving/text_codec.hpp"
#include "actors/shard/cpu_backend.hpp"
#include "model/tokenizer/chat_template.hpp"
#include "model/tokenizer/tokenizer.hpp"

#include <memory>
#include <optional>

namespace caf { class actor_system; class actor_system_config; }

namespace actorlm::serving {

// Announces the engine's message types (needed before an actor_system is built from `cfg`).
void register_engine_types(caf::actor_system_config& cfg);

class ServedModel {
 public:
  // cpu backend: loads the checkpoint and its tokenizer; sim backend: the catalogue's model on
  // modelled hardware, with a synthetic codec. Then spawns the engine. Throws with a
  // user-facing message (model::ModelFileError, std::invalid_argument, std::runtime_error).
  ServedModel(caf::actor_system& sys, const config::Config& cfg);
  ~ServedModel();

  engine::Engine& engine() { return *engine_; }
  const TextCodec& codec() const { return *codec_; }
  // The cpu backend's tokenizer and checkpoint (std::logic_error for other backends).
  const model::Tokenizer& tokenizer() const;
  const shard::CpuBackend& backend() const;
  model::ChatFormat chat_format() const { return chat_format_; }
  // What is served, for the start-up log: model, backend, parallelism, KV capacity.
  const std::string& description() const { return description_; }
  std::uint32_t max_model_len() const { return max_model_len_; }
  // Token ids the engine accepts: [0, vocab_size()).
  std::uint32_t vocab_size() const { return vocab_size_; }

  // The chat messages rendered in the model's format with the assistant's turn opened.
  std::vector<model::Token> chat_prompt(const std::vector<model::ChatMessage>& messages) const;
  // Plain text to complete, with the beginning-of-sequence token when the vocabulary asks for it.
  std::vector<model::Token> raw_prompt(std::string_view text) const;
  // A request with the model's end-of-turn tokens as stop tokens, greedy by default.
  scheduler::RequestSpec request(scheduler::RequestId id, std::vector<model::Token> prompt,
                                 std::uint32_t max_tokens) const;
  const std::vector<model::Token>& stop_tokens() const { return stop_tokens_; }

 private:
  void load_cpu(const config::Config&);
  void load_sim(const config::Config&, engine::KvCapacity&, engine::ShardFactory&);

  std::optional<shard::CpuBackend> backend_;
  std::unique_ptr<model::Tokenizer> tokenizer_;
  std::unique_ptr<TextCodec> codec_;
  std::string description_;
  std::uint32_t max_model_len_ = 0;
  std::uint32_t vocab_size_ = 0;
  model::ChatFormat chat_format_ = model::ChatFormat::chatml;
  std::vector<model::Token> stop_tokens_;
  std::unique_ptr<engine::Engine> engine_;
};

}  // namespace actorlm::serving
