#include "sim/backend/sim_backend.hpp"

#include "actors/serving/backend.hpp"
#include "actors/serving/text_codec.hpp"
#include "sim/backend/sim_shard.hpp"
#include "sim/model/memory_config.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace actorlm::sim {

namespace {


std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

}  // namespace

Catalogue catalogue_for(const config::Config& cfg) {
  if (cfg.sim.hardware_catalogue.empty() && cfg.sim.model_catalogue.empty()) return Catalogue::builtin();
  return Catalogue::load(cfg.sim.hardware_catalogue, cfg.sim.model_catalogue);
}

SimBackend load_sim_backend(const config::Config& cfg) { return load_sim_backend(cfg, catalogue_for(cfg)); }

SimBackend load_sim_backend(const config::Config& cfg, const Catalogue& cat) {
  SimBackend b;
  if (cfg.model.preset.empty()) {
    std::string known;
    for (const auto& m : cat.all_models()) known += (known.empty() ? "" : ", ") + m.key;
    throw std::invalid_argument("model.preset is empty: the sim backend needs a catalogue model; known: " + known);
  }
  b.model = cat.model(cfg.model.preset);
  // engine.pipeline_parallel_degree = N with tensor parallel 1 is the layer split over N GPUs,
  // as sim.parallelism = "layers" with tensor_parallel_degree = N; with tensor parallel T, N
  // stages of T GPUs each.
  const auto degree = static_cast<std::uint32_t>(cfg.engine.world_size());
  const std::string gpus_key = cfg.engine.world_size_keys();
  const auto nodes = static_cast<std::uint32_t>(cfg.sim.nodes);
  if (nodes == 0 || degree % nodes != 0)
    throw std::invalid_argument("sim.nodes = " + std::to_string(nodes) + " must divide " + gpus_key + " = " +
                                std::to_string(degree) + ": every node holds as many GPUs");
  Network network;
  if (!cfg.sim.instance.empty()) {
    b.instance = cat.instance(cfg.sim.instance);
    b.hardware = cat.hardware(b.instance->gpu);
    const std::uint32_t per_node = degree / nodes;
    if (per_node > b.instance->gpus)
      throw std::invalid_argument(
          gpus_key + " = " + std::to_string(degree) +
          (nodes > 1 ? " over sim.nodes = " + std::to_string(nodes) + " needs " + std::to_string(per_node) +
                           " GPUs per node"
                     : " needs " + std::to_string(degree) + " GPUs") +
          ", but " + b.instance->key + " has " + std::to_string(b.instance->gpus) + " (" + b.hardware.name + ")" +
          (nodes == 1 && degree % b.instance->gpus == 0
               ? ": sim.nodes = " + std::to_string(degree / b.instance->gpus) + " spreads them over that many"
               : ""));
    if (nodes > 1 && !b.instance->has_network())
      throw std::invalid_argument("sim.nodes = " + std::to_string(nodes) + ": the catalogue gives " + b.instance->key +
                                  " no network figures (network_gbps, network_latency_us, network_efficiency, "
                                  "network_note)");
    if (nodes > 1) network = Network::of(*b.instance);
  } else {
    if (nodes > 1)
      throw std::invalid_argument("sim.nodes = " + std::to_string(nodes) +
                                  " needs sim.instance: the network between nodes is the instance's");
    b.hardware = cat.hardware(cfg.sim.hardware);
  }
  if (cfg.model.max_model_len > static_cast<std::int64_t>(b.model.max_context))
    throw std::invalid_argument("model.max_model_len = " + std::to_string(cfg.model.max_model_len) +
                                " is longer than " + b.model.name + "'s context of " +
                                std::to_string(b.model.max_context) + " tokens");
  b.parallelism = parallelism_of(cfg);
  b.parallelism.nodes = nodes;
  const MemoryOptions mo = memory_options(cfg);
  b.memory_per_gpu = plan_memory_per_gpu(b.model, b.hardware, cat.runtime(), b.parallelism, mo);
  b.memory = *std::min_element(b.memory_per_gpu.begin(), b.memory_per_gpu.end(),
                               [](const auto& x, const auto& y) { return x.spare_bytes < y.spare_bytes; });

  b.capacity.device_blocks = b.memory.num_blocks;
  b.capacity.host_blocks = swap_blocks(cfg, b.memory.block_bytes);
  b.capacity.vocab_size = b.model.vocab;

  auto shared = std::make_shared<const SimShardModel>(SimShardModel{
      CostModel(b.model, b.hardware, b.parallelism, mo.block_size, network), b.model.vocab, b.model.eos_token_id,
      static_cast<std::uint64_t>(cfg.sim.seed), cfg.sim.fault, static_cast<std::uint64_t>(cfg.sim.fault_step),
      static_cast<std::uint32_t>(cfg.sim.fault_rank)});
  b.shard_model = shared;
  b.factory = [shared](caf::actor_system& sys, std::uint32_t rank, std::uint32_t) {
    return spawn_sim_shard(sys, rank, shared);
  };
  b.rank0_factory = [shared](caf::actor_system& sys, std::uint32_t rank, std::uint32_t) {
    return rank == 0 ? spawn_sim_shard(sys, rank, shared) : shard::shard_actor{};
  };
  return b;
}

std::string SimBackend::describe() const {
  std::string s = model.name + " (" + fixed(double(model.params()) / 1e9, 2) + " B parameters, " +
                  std::to_string(model.layers) + " layers, hidden " + std::to_string(model.hidden) + ", " +
                  std::to_string(model.heads) + " heads / " + std::to_string(model.kv_heads) + " KV heads" +
                  (model.parallel_attention ? ", parallel attention" : "") + ") on ";
  const bool across = parallelism.nodes > 1;
  if (instance) s += instances_label(instance->key, parallelism.nodes) + " (";
  s += std::to_string(parallelism.degree) + " x " + hardware.name + ": " +
       fixed(hardware.bandwidth / 1e9, 0) + " GB/s, " + fixed(hardware.flops / 1e12, 0) + " TFLOPS fp16, " +
       hardware.link;
  if (instance && across)
    s += "; between nodes " + fixed(instance->network_bandwidth * 8 / 1e9, 0) + " Gbit/s (" +
         fixed(instance->network_efficiency * 100, 0) + " % reached), " +
         fixed(instance->network_latency * 1e6, 0) + " us";
  if (instance) s += ")";
  const std::string split = parallelism.stage_tp > 1
                                ? "layer split over " + std::to_string(parallelism.stages()) + " stages of tensor parallel " +
                                      std::to_string(parallelism.stage_tp) + ","
                                : (parallelism.kind == ParallelKind::tensor ? "tensor parallel" : "layer split");
  s += ", " + split + " over " + std::to_string(parallelism.degree) + " GPU" + (parallelism.degree > 1 ? "s" : "") +
       (across ? " on " + std::to_string(parallelism.nodes) + " nodes" : "") + ". " +
       describe_memory(memory, model, hardware) + "; " + std::to_string(capacity.host_blocks) +
       " host blocks for swapping.";
  return s;
}

namespace {

// The engine's view of the sim backend in wall-clock time (a fake GPU server): no weights and no
// tokenizer; prompts are measured by the synthetic codec and the answers are token ids drawn from
// the model's vocabulary, timed by the cost model.
// Sim shards are independent of each other (no data plane): any rank can be hosted anywhere.
serving::Backend serving_backend(const config::Config& cfg, const serving::RankHosting&) {
  if (cfg.sim.clock != config::SimClock::wall)
    throw std::invalid_argument("engine.backend = \"sim\" serves requests in wall-clock time: set sim.clock = "
                                "\"wall\" (\"virtual\" is for actorlm simulate)");
  const SimBackend sim = load_sim_backend(cfg);
  serving::Backend b;
  b.capacity = sim.capacity;
  b.factory = sim.factory;
  b.codec = serving::make_synthetic_codec(sim.capacity.vocab_size);
  b.description = "synthetic text with modelled timing: " + sim.describe();
  b.identity = sim.describe();  // what the catalogues make of the configuration
  const auto& m = sim.memory;
  b.memory = {{"weights", m.weights_bytes},          {"activations", m.activation_bytes},
              {"CUDA context", m.cuda_context_bytes}, {"framework", m.framework_bytes},
              {"communication buffers", m.comm_bytes}, {"KV cache", m.kv_bytes}};
  return b;
}

// Sim ranks never wait on each other (an exit reaches a hanging fault too): they stop at once.
[[maybe_unused]] const bool registered =
    serving::register_backend("sim", serving_backend, [](const config::Config&) { return std::chrono::milliseconds(0); });

}  // namespace

}  // namespace actorlm::sim
