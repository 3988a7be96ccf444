#pragma once
// How long one engine step takes on modelled hardware: a roofline per operator,
//   time(op) = max(FLOPs / (peak x compute_efficiency), bytes / (bandwidth x memory_efficiency))
//              + (1 - memory_overlap) x the min of the two (0 on a GPU: memory_overlap = 1),
// plus a launch overhead per kernel, plus the GPU-to-GPU traffic of the parallelism (ring
// all-reduce for tensor parallelism, point-to-point activation copies for a layer split).
// Hardware's optional terms refine it for kernels the roofline misses (few-row GEMM kernels,
// a dequantizing pass before large GEMMs, attention's own FLOP rate, a fixed cost per step).
// Pure functions of the step's shape; plain C++, no CAF.

#include "sim/model/catalogue.hpp"
#include "sim/model/memory_model.hpp"

#include <array>
#include <cstdint>
#include <string_view>

namespace actorlm::sim {

// A step reduced to the sums the operators' costs depend on. Build it with add(), one call per
// sequence; O(1) per sequence, no allocation.
struct StepShape {
  std::uint64_t tokens = 0;           // new tokens of every sequence (padding rows included)
  std::uint32_t logit_rows = 0;       // rows through the LM head: a sampling sequence's last,
                                      // every row of a chunk scored for prompt log-probabilities
  std::uint32_t prefill_seqs = 0;     // sequences with more than one new token
  std::uint64_t prefill_tokens = 0;
  double prefill_pairs = 0;           // (query, key) pairs under the causal mask, summed
  std::uint64_t prefill_context = 0;  // KV positions the prefill sequences read, summed
  std::uint32_t decode_seqs = 0;      // sequences with one new token
  std::uint64_t decode_context = 0;   // KV positions the decode sequences read, summed
  std::uint32_t swapped_blocks = 0;   // KV blocks moved between host and device
  std::uint32_t copied_blocks = 0;    // KV blocks copied on the device (copy-on-write)

  // One sequence: `new_tokens` computed now, attending to `context` positions in all
  // (context >= new_tokens: the new tokens are the last ones); `logits`: it samples;
  // `all_logits`: every new token's row goes through the LM head (prompt log-probabilities).
  void add(std::uint32_t new_tokens, std::uint32_t context, bool logits, bool all_logits = false);
};

enum class Op : std::uint8_t {
  qkv,                // QKV projection GEMM
  attention_prefill,  // causal attention of multi-token chunks: quadratic in context
  attention_decode,   // one query per sequence: reads the sequence's KV
  attention_out,      // attention output projection GEMM
  ffn_up,             // up (and gate) projection GEMM
  ffn_down,           // down projection GEMM
  elementwise,        // norms, residual adds, activation function: memory-bound
  all_reduce,         // tensor parallel: ring all-reduce per layer, embedding, logits gather
  lm_head,            // logits GEMM, only for rows that sample
  transfer,           // layer split: activations copied to the next GPU
  kv_moves,           // swapped (host link) and copied (device) KV blocks
  launch,             // kernel launch overhead
  host,               // the host's fixed cost per step (Hardware::step_overhead)
  count
};
constexpr std::size_t op_count = static_cast<std::size_t>(Op::count);
std::string_view to_string(Op);

struct StepCost {
  double seconds = 0;                    // s: the sum of by_op
  std::array<double, op_count> by_op{};  // s per operator, over all layers and GPUs
  double operator[](Op op) const { return by_op[static_cast<std::size_t>(op)]; }
};

// The link between nodes when a parallelism spans several (Parallelism::nodes > 1).
struct Network {
  double bandwidth = 0;   // bytes/s per direction, as reached (listed x efficiency)
  double latency = 0;     // s one way
  static Network of(const Instance& i) { return {i.network_bandwidth * i.network_efficiency, i.network_latency}; }
};

class CostModel {
 public:
  // Throws std::invalid_argument when the model does not split over the parallel degree, or the
  // parallelism spans nodes without a network (or over unequal nodes).
  CostModel(const ModelPreset&, const Hardware&, Parallelism, std::uint32_t block_size, Network = {});

  StepCost step(const StepShape&) const;
  double step_seconds(const StepShape& s) const { return step(s).seconds; }

  const ModelPreset& model() const { return model_; }
  const Hardware& hardware() const { return hw_; }
  Parallelism parallelism() const { return par_; }

 private:
  ModelPreset model_;
  Hardware hw_;
  Parallelism par_;
  Network net_;
  model::RankShard rank_;        // per rank (degree 1 for a layer split)
  double block_bytes_ = 0;       // bytes: one KV block on the busiest GPU
  double kernels_per_layer_ = 0; // launches of a layer that every step runs
};

}  // namespace actorlm::sim
