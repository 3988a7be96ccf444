// The per-GPU memory model. Weights follow Megatron/vLLM sharding (model/arch/sharding.hpp, the
// rules the cpu backend loads the layers by): Q heads and FFN width split over the ranks; the
// vocabulary (embedding and LM head) split too (as the cuda backend splits it), or held whole as
// the cpu backend holds it (MemoryOptions::vocab_parallel); K/V heads split, or replicated when there are fewer KV heads
// than ranks; norms replicated. The activation workspace is what vLLM's profiling run measures:
// one layer's intermediates for max_num_batched_tokens tokens (layers run one after another, so
// only one layer's are live) plus fp32 logits.
#include "sim/model/memory_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace actorlm::sim {

std::string_view to_string(ParallelKind k) { return k == ParallelKind::tensor ? "tensor" : "layers"; }

std::string label(const Parallelism& p) {
  if (p.kind == ParallelKind::tensor) return "TP " + std::to_string(p.degree);
  if (p.stage_tp > 1) return std::to_string(p.stages()) + " stages of TP " + std::to_string(p.stage_tp);
  return "layer split over " + std::to_string(p.degree) + " GPUs";
}

void check_parallelism(const Parallelism& p, std::uint32_t layers, const std::string& model_name) {
  if (p.degree == 0) throw std::invalid_argument("parallel degree 0");
  if (p.kind == ParallelKind::layers && (p.stage_tp == 0 || p.degree % p.stage_tp != 0))
    throw std::invalid_argument(std::to_string(p.degree) + " GPUs do not make stages of " + std::to_string(p.stage_tp));
  if (p.stages() > layers)
    throw std::invalid_argument(model_name + " has " + std::to_string(layers) + " layers: it cannot be split over " +
                                std::to_string(p.stages()) + (p.stage_tp > 1 ? " stages" : " GPUs"));
}

model::RankShard rank_shard(const ModelPreset& m, std::uint32_t tp) {
  try {
    return model::shard_for_rank(m, 0, tp);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(m.name + ": " + e.what());
  }
}

namespace {

constexpr double gb = 1e9;
constexpr double logit_bytes = 4;  // fp32 logits

// Elements live at once inside one layer, per token: residual + normed input, then the attention
// branch (QKV + attention output) or the MLP (gate/up + activation); both at once when the
// branches run in parallel.
double activation_elems_per_token(const ModelPreset& m, const model::RankShard& r) {
  const double attention = (r.q_heads + 2.0 * r.kv_heads) * m.head_dim + double(r.q_heads) * m.head_dim;
  const double mlp = double(m.ffn_matrices()) * r.ffn_columns;  // gate+up (or up) and the activation
  return 2.0 * m.hidden + (m.parallel_attention ? attention + mlp : std::max(attention, mlp));
}

struct GpuPlan {
  std::uint32_t layers = 0;
  double weights = 0, activations = 0, kv_per_token = 0;
};

// One GPU of stage g (a tensor rank; the ranks of a stage are alike).
GpuPlan plan_gpu(const ModelPreset& m, Parallelism p, std::uint32_t g, const MemoryOptions& o) {
  const model::RankShard r = rank_shard(m, p.tensor_degree());
  GpuPlan out;
  out.layers = model::layers_of_stage(m, p.stages(), g);
  const bool first = g == 0;
  const bool last = g + 1 == p.stages();
  double elems = out.layers * double(model::layer_weight_elements(m, r));
  const double vocab_rows = o.vocab_parallel ? r.vocab_rows : m.vocab;
  if (first) elems += vocab_rows * m.hidden;  // embedding
  // LM head: its own matrix, or the tied embedding, which must also be where the head runs.
  if (last && (!m.tied_embeddings || !first)) elems += vocab_rows * m.hidden;
  if (last) elems += double(m.norm_params());  // final norm
  out.weights = elems * m.weight_bytes;
  const double tokens = o.max_num_batched_tokens;
  out.activations = out.layers > 0 ? tokens * activation_elems_per_token(m, r) * fp16_bytes : 0;
  if (last) out.activations += std::min<double>(o.max_num_seqs, tokens) * m.vocab * logit_bytes;
  out.kv_per_token = double(model::kv_elements_per_token(m, r, out.layers)) * o.kv_element_bytes;
  return out;
}

std::string fixed(double v, int digits = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

}  // namespace

std::vector<MemoryBreakdown> plan_memory_per_gpu(const ModelPreset& m, const Hardware& hw,
                                                 const RuntimeOverheads& rt, Parallelism p,
                                                 const MemoryOptions& o) {
  check_parallelism(p, m.layers, m.name);
  if (o.block_size == 0) throw std::invalid_argument("block size 0");
  const std::uint32_t gpus = p.stages();  // distinct GPU plans: one per stage
  std::vector<MemoryBreakdown> all;
  std::uint32_t blocks = 0xffffffffu;  // what every GPU can hold: the block manager's count
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const GpuPlan plan = plan_gpu(m, p, g, o);
    MemoryBreakdown b;
    b.parallelism = p;
    b.gpu = g;
    b.layers = plan.layers;
    b.device_bytes = hw.memory_bytes;
    b.usable_bytes = hw.memory_bytes * o.gpu_memory_utilization;
    b.weights_bytes = plan.weights;
    b.activation_bytes = plan.activations;
    b.cuda_context_bytes = hw.cuda_context_bytes;
    b.framework_bytes = rt.framework_bytes;
    // Only tensor parallelism runs collectives (a layer split copies activations between devices).
    b.comm_bytes = p.tensor_degree() > 1 ? rt.comm_buffer_bytes : 0;
    b.kv_bytes_per_token = plan.kv_per_token;
    b.block_size = o.block_size;
    b.block_bytes = plan.kv_per_token * o.block_size;
    const double fixed_bytes = b.weights_bytes + b.activation_bytes + b.overhead_bytes();
    const double left = b.usable_bytes - fixed_bytes;
    if (left < 0 && o.num_gpu_blocks_override == 0) {
      throw std::invalid_argument(
          label(p) + ": " + m.name + " needs " + fixed(fixed_bytes / gb) + " GB on " +
          (p.stage_tp > 1 ? "each GPU of stage " : "GPU ") + std::to_string(g) + " (weights " + fixed(b.weights_bytes / gb) + " GB, activations " +
          fixed(b.activation_bytes / gb) + " GB for " + std::to_string(o.max_num_batched_tokens) +
          " batched tokens, CUDA context, framework and buffers " + fixed(b.overhead_bytes() / gb) +
          " GB), but " + hw.name + "'s " + fixed(hw.memory_bytes / gb) + " GB x " +
          fixed(o.gpu_memory_utilization) + " gpu_memory_utilization leaves " +
          fixed(b.usable_bytes / gb) + " GB; use more GPUs, a larger GPU, or fewer batched tokens");
    }
    if (o.num_gpu_blocks_override > 0) {
      b.num_blocks = o.num_gpu_blocks_override;
    } else {
      b.num_blocks = b.block_bytes > 0
                         ? static_cast<std::uint32_t>(std::min(std::floor(left / b.block_bytes), 4.0e9))
                         : 0;
    }
    blocks = std::min(blocks, b.num_blocks);
    all.push_back(b);
  }
  for (MemoryBreakdown& b : all) {
    b.num_blocks = blocks;
    b.kv_bytes = b.num_blocks * b.block_bytes;
    b.spare_bytes = b.usable_bytes - b.weights_bytes - b.activation_bytes - b.overhead_bytes() - b.kv_bytes;
  }
  const MemoryBreakdown& best = *std::min_element(
      all.begin(), all.end(), [](const auto& x, const auto& y) { return x.spare_bytes < y.spare_bytes; });
  if (best.kv_tokens() < o.max_model_len) {
    throw std::invalid_argument(
        label(p) + ": " + m.name + " on " + hw.name + " leaves room for KV of " +
        std::to_string(best.kv_tokens()) + " tokens (" + fixed(best.kv_bytes / gb) + " GB after weights " +
        fixed(best.weights_bytes / gb) + " GB, activations " + fixed(best.activation_bytes / gb) +
        " GB and overhead " + fixed(best.overhead_bytes() / gb) + " GB), less than one sequence of "
        "model.max_model_len = " + std::to_string(o.max_model_len) + " tokens");
  }
  return all;
}

MemoryBreakdown plan_memory(const ModelPreset& m, const Hardware& hw, const RuntimeOverheads& rt,
                            Parallelism p, const MemoryOptions& o) {
  const auto all = plan_memory_per_gpu(m, hw, rt, p, o);
  return *std::min_element(all.begin(), all.end(),
                           [](const auto& x, const auto& y) { return x.spare_bytes < y.spare_bytes; });
}

std::string describe_memory(const MemoryBreakdown& b, const ModelPreset& m, const Hardware& hw) {
  std::string s = label(b.parallelism) + ": ";
  const std::uint32_t t = b.parallelism.stage_tp;
  if (b.parallelism.kind == ParallelKind::layers && t > 1)
    s += "stage " + std::to_string(b.gpu) + " (GPUs " + std::to_string(b.gpu * t) + "-" + std::to_string(b.gpu * t + t - 1) +
         ", " + std::to_string(b.layers) + " of " + std::to_string(m.layers) + " layers): ";
  else if (b.parallelism.kind == ParallelKind::layers)
    s += "GPU " + std::to_string(b.gpu) + " (" + std::to_string(b.layers) + " of " +
         std::to_string(m.layers) + " layers): ";
  s += "weights " + fixed(b.weights_bytes / gb) + " GB of " + fixed(b.device_bytes / gb) + " GB (" +
       hw.name + ", " + fixed(b.usable_bytes / gb) + " GB usable), activations " +
       fixed(b.activation_bytes / gb) + " GB, CUDA context + framework " +
       fixed((b.cuda_context_bytes + b.framework_bytes) / gb) + " GB, comm buffers " +
       fixed(b.comm_bytes / gb) + " GB, KV cache " + fixed(b.kv_bytes / gb) + " GB: " +
       std::to_string(b.num_blocks) + " blocks of " + std::to_string(b.block_size) +
       " tokens = KV for " + std::to_string(b.kv_tokens()) + " tokens (" +
       fixed(b.kv_bytes_per_token / 1024, 1) + " KiB per token), spare " + fixed(b.spare_bytes / gb) + " GB";
  return s;
}

}  // namespace actorlm::sim
