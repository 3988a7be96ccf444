#include "actors/serving/served_model.hpp"

#include "actors/cluster/cluster_protocol.hpp"
#include "actors/cluster/supervisor.hpp"
#include "actors/cluster/network.hpp"
#include "actors/kv/block_manager_protocol.hpp"
#include "actors/shard/shard_protocol.hpp"

#include <caf/actor_system_config.hpp>

namespace actorlm::serving {

namespace detail {
struct Cluster {
  cluster::ClusterSupervisor supervisor;
};
}  // namespace detail

void register_engine_types(caf::actor_system_config& cfg) {
  kv::add_block_manager_types(cfg);
  shard::add_shard_types(cfg);
  cluster::add_cluster_types(cfg);
}

void configure_actor_system(caf::actor_system_config& cfg) {
  register_engine_types(cfg);
  cfg.set("scheduler.policy", caf::atom("sharing"));
}

void configure_actor_system(caf::actor_system_config& cfg, const config::Config& config) {
  configure_actor_system(cfg);
  if (!config.cluster.workers.empty()) cluster::configure_network(cfg, config.cluster);
}

ServedModel::ServedModel(caf::actor_system& sys, const config::Config& cfg)
    : max_model_len_(static_cast<std::uint32_t>(cfg.model.max_model_len)) {
  if (cfg.cluster.workers.empty()) {
    backend_ = load_backend(cfg);
    engine_ = std::make_unique<engine::Engine>(sys, cfg, backend_.capacity, backend_.factory);
    return;
  }
  backend_ = load_backend(cfg, RankHosting::none());
  cluster_ = std::unique_ptr<detail::Cluster>(new detail::Cluster{cluster::ClusterSupervisor(sys, cfg, backend_.identity)});
  const auto shards = cluster_->supervisor.shards();
  engine::ShardFactory remote = [shards](caf::actor_system&, std::uint32_t rank, std::uint32_t) {
    return shards.at(rank);
  };
  backend_.description += " (ranks on the cluster's workers)";
  engine_ = std::make_unique<engine::Engine>(sys, cfg, backend_.capacity, remote, cluster_->supervisor.locations());
  cluster_->supervisor.watch(*engine_);
}

std::optional<cluster::ClusterStatus> ServedModel::cluster_status() const {
  if (!cluster_) return std::nullopt;
  return cluster_->supervisor.status();
}

ServedModel::~ServedModel() {
  // No recovery while the engine stops; the workers are let go after it.
  if (cluster_) cluster_->supervisor.stop_watching();
  engine_.reset();
  cluster_.reset();
}

std::vector<model::Token> ServedModel::chat_prompt(const std::vector<model::ChatMessage>& messages) const {
  return backend_.codec->chat_prompt(messages);
}

std::vector<model::Token> ServedModel::raw_prompt(std::string_view text) const {
  return backend_.codec->raw_prompt(text);
}

scheduler::RequestSpec ServedModel::request(scheduler::RequestId id, std::vector<model::Token> prompt,
                                            std::uint32_t max_tokens) const {
  scheduler::RequestSpec s;
  s.id = id;
  s.prompt = std::move(prompt);
  s.max_tokens = max_tokens;
  s.stop_token_ids = backend_.stop_tokens;
  s.sampling.temperature = 0.0f;
  return s;
}

}  // namespace actorlm::serving
