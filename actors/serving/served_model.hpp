#pragma once
// A model being served: the configured backend (looked up in the backend registry) and the
// engine over its shards, plus the backend's text codec. What the CLI, the benchmarks and the
// HTTP front end put requests through.

#include "actors/cluster/cluster_status.hpp"
#include "actors/config/config.hpp"
#include "actors/engine/engine.hpp"
#include "actors/serving/backend.hpp"
#include "actors/serving/text_codec.hpp"

#include <memory>
#include <optional>

namespace caf { class actor_system; class actor_system_config; }

namespace actorlm::serving {

// Announces the engine's message types (needed before an actor_system is built from `cfg`).
void register_engine_types(caf::actor_system_config& cfg);
// For processes that serve in real time (serve, generate, the benchmarks): the engine's types,
// and CAF's work-sharing scheduler instead of its default work-stealing one, whose idle workers
// poll for about 25 ms after each burst of messages and take the cores from the cpu backend's
// thread pool and the HTTP loop. Measured side by side on 2 cores (bench serve, sim backend):
// server CPU per token 5,100-5,600 us -> 400-430 us at 1 stream, 50-62 -> 12-13 at 256 streams;
// bench cpu tokens/s at 1 and 8 concurrent +10 % and +7 %.
void configure_actor_system(caf::actor_system_config& cfg);
// The same for a process that serves `config`: with [cluster] workers (or for a worker), CAF's
// network layer too, with mutual TLS when the cluster has certificates. Throws
// std::invalid_argument for unreadable TLS files.
void configure_actor_system(caf::actor_system_config& cfg, const config::Config& config);

namespace detail { struct Cluster; }

class ServedModel {
 public:
  // Sets up the backend named by engine.backend, then spawns the engine. With [cluster] workers
  // the ranks run on the workers (this process loads the tokenizer, not the weights), and the
  // actor system must have been configured by configure_actor_system(cfg, config). Throws with
  // a user-facing message (model::ModelFileError, std::invalid_argument, std::runtime_error).
  ServedModel(caf::actor_system& sys, const config::Config& cfg);
  ~ServedModel();

  engine::Engine& engine() { return *engine_; }
  const TextCodec& codec() const { return *backend_.codec; }
  // What is served, for the start-up log: model, backend, parallelism, KV capacity.
  const std::string& description() const { return backend_.description; }
  const std::vector<MemoryItem>& memory() const { return backend_.memory; }
  std::uint32_t max_model_len() const { return max_model_len_; }
  // Whether the backend computes prompt log-probabilities (serving::Backend::prompt_logprobs).
  bool computes_prompt_logprobs() const { return backend_.prompt_logprobs; }
  // Token ids the engine accepts: [0, vocab_size()).
  std::uint32_t vocab_size() const { return backend_.capacity.vocab_size; }
  // Device KV blocks the backend's cache holds (what the block manager hands out).
  std::uint32_t kv_blocks() const { return backend_.capacity.device_blocks; }

  // The chat messages rendered in the model's format with the assistant's turn opened.
  std::vector<model::Token> chat_prompt(const std::vector<model::ChatMessage>& messages) const;
  // Plain text to complete, with the beginning-of-sequence token when the vocabulary asks for it.
  std::vector<model::Token> raw_prompt(std::string_view text) const;
  // A request with the model's end-of-turn tokens as stop tokens, greedy by default.
  scheduler::RequestSpec request(scheduler::RequestId id, std::vector<model::Token> prompt,
                                 std::uint32_t max_tokens) const;
  const std::vector<model::Token>& stop_tokens() const { return backend_.stop_tokens; }
  // With [cluster] workers: their state, and a failed engine is recovered when they are back
  // (the daemon keeps serving 503s meanwhile instead of exiting); nullopt in one process.
  std::optional<cluster::ClusterStatus> cluster_status() const;
  bool recovers_from_failures() const { return cluster_ != nullptr; }

 private:
  Backend backend_;
  std::uint32_t max_model_len_ = 0;
  std::unique_ptr<detail::Cluster> cluster_;  // the workers' shards, when [cluster] has workers
  std::unique_ptr<engine::Engine> engine_;    // stopped first: declared last
};

}  // namespace actorlm::serving
