#pragma once
// Where each GPU's memory goes when a model is served: weights, activation workspace, CUDA
// context and framework, communication buffers, and what remains for KV blocks. fp16 weights
// and KV (2 bytes per element). Plain C++: no CAF.

#include "model/arch/sharding.hpp"
#include "sim/model/catalogue.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::sim {

constexpr double fp16_bytes = 2;  // bytes per KV and activation element (weights: ModelPreset)

enum class ParallelKind {
  tensor,  // Megatron-style: every GPU holds 1/p of every layer; all work on every step
  layers,  // HF Accelerate device_map: GPU g holds a contiguous slice of layers; one works at a time
};
std::string_view to_string(ParallelKind);

struct Parallelism {
  ParallelKind kind = ParallelKind::tensor;
  std::uint32_t degree = 1;  // GPUs, in all
  std::uint32_t nodes = 1;   // instances the GPUs are spread over, degree / nodes on each
  // A layer split of tensor-parallel stages (engine.pipeline_parallel_degree with
  // tensor_parallel_degree above 1): each stage is this many GPUs, tensor parallel among them,
  // GPUs [s * stage_tp, (s + 1) * stage_tp) holding stage s. 1: each stage one GPU. Must divide
  // degree; unused with kind tensor.
  std::uint32_t stage_tp = 1;

  // The tensor-parallel degree every layer runs at, and the stages one works after another.
  std::uint32_t tensor_degree() const { return kind == ParallelKind::tensor ? degree : stage_tp; }
  std::uint32_t stages() const { return kind == ParallelKind::tensor ? 1 : degree / stage_tp; }
};

// "TP 8", "layer split over 8 GPUs", "2 stages of TP 4".
std::string label(const Parallelism&);
// Throws std::invalid_argument for a degree of 0, a stage_tp that does not divide the degree,
// and more stages than `layers`.
void check_parallelism(const Parallelism&, std::uint32_t layers, const std::string& model_name);

// What one tensor-parallel rank holds: model::shard_for_rank (model/arch/sharding.hpp), rank 0
// (the ranks are alike in size), with the preset's name in front of a refusal.
model::RankShard rank_shard(const ModelPreset&, std::uint32_t tp);

struct MemoryOptions {
  double gpu_memory_utilization = 0.9;    // (0, 1]: share of device memory the runtime may use
  std::uint32_t block_size = 16;          // tokens per KV block
  std::uint32_t max_num_batched_tokens = 8192;  // sizes the activation workspace
  std::uint32_t max_num_seqs = 256;       // rows of logits
  std::uint32_t max_model_len = 2048;     // the KV cache must hold one sequence this long
  std::uint32_t num_gpu_blocks_override = 0;    // > 0: this many blocks, whatever fits
  double kv_element_bytes = fp16_bytes;   // bytes per KV element (the cuda backend's f32 cache: 4)
  // The embedding and the LM head split by vocabulary rows over the tensor ranks (Megatron's and
  // vLLM's layout, which the simulator models, and actorlm's cuda backend's). false: each rank of
  // the first stage holds the whole embedding and the sampling rank of the last stage the whole
  // LM head, as actorlm's cpu backend does (the plan is then the sampling rank's, the largest,
  // and every rank takes its block count).
  bool vocab_parallel = true;
};

// One GPU's memory. usable = weights + activations + cuda_context + framework + comm + kv + spare.
struct MemoryBreakdown {
  Parallelism parallelism;
  std::uint32_t gpu = 0;          // which GPU (tensor parallel: all alike, reported as 0; stages
                                  // of TP: the stage, its GPUs alike; without vocab_parallel
                                  // the sampling rank's, the largest)
  std::uint32_t layers = 0;       // decoder layers whose weights and KV live here
  double device_bytes = 0;        // bytes: the whole device
  double usable_bytes = 0;        // bytes: device x gpu_memory_utilization
  double weights_bytes = 0;       // bytes
  double activation_bytes = 0;    // bytes: one layer's intermediates for the largest batch + logits
  double cuda_context_bytes = 0;  // bytes
  double framework_bytes = 0;     // bytes
  double comm_bytes = 0;          // bytes: collective buffers (0 on one GPU)
  double kv_bytes = 0;            // bytes: num_blocks x block_bytes
  double spare_bytes = 0;         // bytes: usable left over (< one block unless overridden;
                                  // negative when num_gpu_blocks_override exceeds the budget)
  double kv_bytes_per_token = 0;  // bytes: K and V of every layer on this GPU
  double block_bytes = 0;         // bytes: one KV block on this GPU
  std::uint32_t block_size = 0;   // tokens per block
  std::uint32_t num_blocks = 0;

  std::uint64_t kv_tokens() const { return std::uint64_t{num_blocks} * block_size; }
  double overhead_bytes() const { return cuda_context_bytes + framework_bytes + comm_bytes; }
};

// Every GPU's memory (tensor parallel: one entry, the GPUs are alike, or without vocab_parallel
// the sampling rank's, the largest; layer split: one per GPU). All GPUs get the same number of
// blocks, what the tightest one holds, as one block manager serves them all. Throws
// std::invalid_argument, saying what is needed and what there is, when the model does not fit
// (weights, workspace and overhead above the budget, or no room for one sequence).
std::vector<MemoryBreakdown> plan_memory_per_gpu(const ModelPreset&, const Hardware&,
                                                 const RuntimeOverheads&, Parallelism,
                                                 const MemoryOptions&);
// The binding GPU of plan_memory_per_gpu: the one with the least memory to spare.
MemoryBreakdown plan_memory(const ModelPreset&, const Hardware&, const RuntimeOverheads&,
                            Parallelism, const MemoryOptions&);

// One line: "TP 4: weights 20.65 GB of 24.15 GB, activations ..., KV for N tokens (...)".
std::string describe_memory(const MemoryBreakdown&, const ModelPreset&, const Hardware&);

}  // namespace actorlm::sim
