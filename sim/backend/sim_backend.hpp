#pragma once
// Sets up the sim backend for an engine: looks the model, GPU and instance up in the
// catalogue, plans each GPU's memory (KV blocks for the scheduler), builds the cost model and
// hands the engine a factory for sim shard actors.
//
// Reads model.preset, model.max_model_len, sim.hardware / sim.instance (an instance decides
// the GPU type and caps the parallel degree per node), sim.nodes (instances the GPUs span, with
// the instance's network between them), sim.parallelism, sim.seed,
// engine.tensor_parallel_degree (the number of GPUs, whatever sim.parallelism) and
// engine.pipeline_parallel_degree (above 1: that many stages of tensor_parallel_degree GPUs), cache.*,
// scheduler.max_num_batched_tokens and scheduler.max_num_seqs.
//
// Not modelled here: the scheduler's preemption cost estimates (SchedulerOptions'
// recompute_s_per_token / swap_s_per_block) keep their defaults, because spawn_engine builds
// SchedulerOptions from the config alone.

#include "actors/config/config.hpp"
#include "actors/engine/engine.hpp"
#include "sim/model/catalogue.hpp"
#include "sim/model/cost_model.hpp"
#include "sim/model/memory_model.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace actorlm::sim {

struct SimShardModel;

struct SimBackend {
  ModelPreset model;
  Hardware hardware;
  std::optional<Instance> instance;
  Parallelism parallelism;
  MemoryBreakdown memory;       // per GPU (layer split: the GPU with the least memory to spare)
  std::vector<MemoryBreakdown> memory_per_gpu;  // layer split: every GPU; tensor: one, all alike
  engine::KvCapacity capacity;  // device blocks from the memory model, host blocks from
                                // cache.swap_space, vocab_size
  std::shared_ptr<const SimShardModel> shard_model;  // the cost model the shards share
  engine::ShardFactory factory;                      // spawns sim shards, one per rank
  // For virtual-time runs where speed matters: rank 0's sim shard, and no actor (a null handle)
  // for the other ranks, which only accept and drop each Step. The scheduler's sends to them
  // are then no-ops (CAF's anon_send and anon_send_exit skip invalid handles), which saves a
  // copy of every Step per rank: about 2.9x more simulated requests per second at TP 8
  // (measured: 2,900 -> 8,500 requests/s, Falcon-40B 32 in / 128 out, 64 concurrent clients,
  // when every Step carried whole block tables; with incremental steps the gap is about 1.45x:
  // bench sim's sim_requests_per_s against sim_requests_per_s_all_ranks).
  engine::ShardFactory rank0_factory;
  std::string describe() const;  // one paragraph: model, hardware, parallelism, memory
};

// The built-in catalogue, or the files named by sim.hardware_catalogue / sim.model_catalogue.
// Throws CatalogueError.
Catalogue catalogue_for(const config::Config&);

// Throws std::invalid_argument with a user-facing message: unknown preset (listing the known
// ones), unknown hardware or instance, more GPUs than the instance has, a model that does not
// split over the GPUs or does not fit in them.
SimBackend load_sim_backend(const config::Config&, const Catalogue&);
SimBackend load_sim_backend(const config::Config&);  // with catalogue_for(config)

}  // namespace actorlm::sim
