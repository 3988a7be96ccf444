#pragma once
// A model being served: the engine (scheduler, block manager, shard actors of the configured
// backend) plus the model's tokenizer and chat format. What the CLI, the benchmarks and the
// HTTP front end put requests through.

#include "actors/config/config.hpp"
#include "actors/engine/engine.hpp"
#include "actors/shard/cpu_backend.hpp"
#include "model/tokenizer/chat_template.hpp"
#include "model/tokenizer/tokenizer.hpp"

#include <memory>

namespace caf { class actor_system; class actor_system_config; }

namespace actorlm::serving {

// Announces the engine's message types (needed before an actor_system is built from `cfg`).
void register_engine_types(caf::actor_system_config& cfg);

class ServedModel {
 public:
  // Loads the checkpoint, its tokenizer, and spawns the engine. Throws with a user-facing
  // message (model::ModelFileError, std::invalid_argument, std::runtime_error) on failure.
  ServedModel(caf::actor_system& sys, const config::Config& cfg);
  ~ServedModel();

  engine::Engine& engine() { return *engine_; }
  const model::Tokenizer& tokenizer() const { return *tokenizer_; }
  const shard::CpuBackend& backend() const { return backend_; }
  model::ChatFormat chat_format() const { return chat_format_; }

  // The chat messages rendered in the model's format with the assistant's turn opened.
  std::vector<model::Token> chat_prompt(const std::vector<model::ChatMessage>& messages) const;
  // Plain text to complete, with the beginning-of-sequence token when the vocabulary asks for it.
  std::vector<model::Token> raw_prompt(std::string_view text) const;
  // A request with the model's end-of-turn tokens as stop tokens, greedy by default.
  scheduler::RequestSpec request(scheduler::RequestId id, std::vector<model::Token> prompt,
                                 std::uint32_t max_tokens) const;
  const std::vector<model::Token>& stop_tokens() const { return stop_tokens_; }

 private:
  shard::CpuBackend backend_;
  std::unique_ptr<model::Tokenizer> tokenizer_;
  model::ChatFormat chat_format_ = model::ChatFormat::chatml;
  std::string default_system_;
  std::vector<model::Token> stop_tokens_;
  std::unique_ptr<engine::Engine> engine_;
};

}  // namespace actorlm::serving
