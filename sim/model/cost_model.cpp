// The roofline cost of one step. Every GEMM reads its weights once per step (so a decode step
// is bandwidth-bound on weights) plus its input and output activations; attention reads each
// sequence's KV; under tensor parallelism each layer ends in one ring all-reduce per branch
// merge (one with parallel attention, two for sequential attention + MLP). All sizes are per
// rank; a layer split runs whole layers on one GPU at a time, so its layer costs are summed.
// Across nodes the GPUs are numbered node by node: a tensor-parallel ring crosses the network
// once per node, and as every hop of a ring step moves its chunk at once, the slowest hop (the
// network) paces each step; a layer split crosses it at the nodes - 1 stage boundaries between
// nodes and the PCIe/NVLink link at the others. NCCL's trees and hierarchical all-reduces,
// which can do better across many nodes, are not modelled.
#include "sim/model/cost_model.hpp"

#include <algorithm>
#include <stdexcept>

namespace actorlm::sim {

void StepShape::add(std::uint32_t new_tokens, std::uint32_t context, bool logits, bool all_logits) {
  context = std::max(context, new_tokens);
  tokens += new_tokens;
  if (all_logits) logit_rows += new_tokens;
  else if (logits) ++logit_rows;
  if (new_tokens == 1) {
    ++decode_seqs;
    decode_context += context;
  } else if (new_tokens > 1) {
    const double n = new_tokens;
    ++prefill_seqs;
    prefill_tokens += new_tokens;
    // Query i of the chunk (0-based) sees positions [0, context - n + i]: sum over i.
    prefill_pairs += n * double(context) - n * (n - 1) / 2;
    prefill_context += context;
  }
}

std::string_view to_string(Op op) {
  switch (op) {
    case Op::qkv: return "qkv";
    case Op::attention_prefill: return "attention_prefill";
    case Op::attention_decode: return "attention_decode";
    case Op::attention_out: return "attention_out";
    case Op::ffn_up: return "ffn_up";
    case Op::ffn_down: return "ffn_down";
    case Op::elementwise: return "elementwise";
    case Op::all_reduce: return "all_reduce";
    case Op::lm_head: return "lm_head";
    case Op::transfer: return "transfer";
    case Op::kv_moves: return "kv_moves";
    case Op::launch: return "launch";
    case Op::host: return "host";
    case Op::count: break;
  }
  return "?";
}

CostModel::CostModel(const ModelPreset& m, const Hardware& hw, Parallelism p, std::uint32_t block_size, Network net)
    : model_(m), hw_(hw), par_(p), net_(net),
      rank_(rank_shard(m, p.tensor_degree())) {
  check_parallelism(p, m.layers, m.name);
  if (p.nodes == 0 || p.degree % p.nodes != 0)
    throw std::invalid_argument(std::to_string(p.degree) + " GPUs do not spread equally over " + std::to_string(p.nodes) +
                                " nodes");
  if (p.nodes > 1 && (net.bandwidth <= 0 || net.latency < 0))
    throw std::invalid_argument("a parallelism over " + std::to_string(p.nodes) +
                                " nodes needs the network between them (bandwidth and latency)");
  const std::uint32_t layers_here = model::layers_of_stage(m, p.stages(), 0);
  block_bytes_ = double(model::kv_elements_per_token(m, rank_, layers_here)) * fp16_bytes * block_size;
  const bool tp = p.tensor_degree() > 1;
  // QKV, rotary + KV-cache write, attention output, MLP up, activation, MLP down, norms,
  // residual adds, all-reduces (attention kernels are counted per step: prefill and/or decode).
  kernels_per_layer_ = 1 + 1 + 1 + 1 + 1 + 1 + m.norms_per_layer + (m.parallel_attention ? 1 : 2) +
                       (tp ? (m.parallel_attention ? 1 : 2) : 0);
}

StepCost CostModel::step(const StepShape& s) const {
  StepCost c;
  auto at = [&](Op op) -> double& { return c.by_op[static_cast<std::size_t>(op)]; };
  const double flops = hw_.flops * hw_.compute_efficiency;        // FLOP/s
  const double bandwidth = hw_.bandwidth * hw_.memory_efficiency;  // bytes/s
  const double link = hw_.link_bandwidth * hw_.link_efficiency;    // bytes/s
  const bool across = par_.nodes > 1;
  // A tensor-parallel group spans nodes unless its GPUs fit whole in a node's (stages of TP
  // within nodes keep their all-reduces off the network; a stage straddling two nodes does not).
  const std::uint32_t per_node = par_.degree / par_.nodes;
  const bool ring_across = across && per_node % par_.tensor_degree() != 0;
  // A ring step's pace: its slowest hop, the network when the ring spans nodes.
  const double ring_bandwidth = ring_across ? std::min(link, net_.bandwidth) : link;
  const double ring_latency = ring_across ? std::max(hw_.link_latency, net_.latency) : hw_.link_latency;
  // A kernel of `f` FLOPs at `rate` that moves `bytes`: the longer of its arithmetic and its
  // memory traffic, plus the part of the shorter that does not overlap it (none on a GPU's
  // roofline; all of it as calibrate writes the cpu backend's, a share with --fit-overlap).
  const double exposed = 1 - hw_.memory_overlap;
  auto kernel = [&](double rate, double f, double bytes) {
    const double compute_s = f / rate, memory_s = bytes / bandwidth;
    return std::max(compute_s, memory_s) + exposed * std::min(compute_s, memory_s);
  };
  const double decode_attention_flops = hw_.attention_flops > 0 ? hw_.attention_flops : flops;
  const double prefill_attention_flops =
      hw_.prefill_attention_flops > 0 ? hw_.prefill_attention_flops : decode_attention_flops;
  const double wb = model_.weight_bytes;  // bytes per weight
  // A GEMM of `rows` rows over `w` weights that also reads and writes `io_bytes`.
  auto gemm = [&](double rows, double w, double io_bytes) {
    const bool few = hw_.small_gemm_rows > 0 && rows < hw_.small_gemm_rows;
    const double f = 2 * rows * w, bytes = wb * w + io_bytes;
    if (few) return kernel(hw_.small_gemm_flops, f, bytes);
    const bool many = hw_.large_batch_rows > 0 && rows >= hw_.large_batch_rows;
    return kernel(many ? hw_.large_batch_flops : flops, f, bytes) + (hw_.gemm_weight_rate > 0 ? w / hw_.gemm_weight_rate : 0);
  };

  const double p = par_.tensor_degree();  // GPUs every layer is split over
  const bool tp = p > 1;
  const double L = model_.layers;  // tensor: every GPU runs every layer; split: one stage at a time
  const double H = model_.hidden, d = model_.head_dim, F = rank_.ffn_columns;
  const double qh = rank_.q_heads, kvh = rank_.kv_heads;
  const double T = double(s.tokens);
  const double b = fp16_bytes;
  double kernels = 0;

  if (s.tokens > 0) {
    const double qkv_w = H * (qh + 2 * kvh) * d;  // weight elements, [hidden, (qh + 2 kvh) d]
    at(Op::qkv) = L * gemm(T, qkv_w, b * (T * H + T * (qh + 2 * kvh) * d));
    if (s.prefill_seqs > 0) {
      // QK^T and PV: 2 d FLOPs each per (query, key) pair and head; reads Q, writes O, reads K/V.
      at(Op::attention_prefill) =
          L * kernel(prefill_attention_flops, 4 * qh * d * s.prefill_pairs,
                       b * (2.0 * double(s.prefill_tokens) * qh * d + double(s.prefill_context) * 2 * kvh * d));
      kernels += L;
    }
    if (s.decode_seqs > 0) {
      at(Op::attention_decode) =
          L * kernel(decode_attention_flops, 4 * qh * d * double(s.decode_context),
                       b * (double(s.decode_context) * 2 * kvh * d + 2.0 * s.decode_seqs * qh * d));
      kernels += L;
    }
    const double out_w = qh * d * H;
    at(Op::attention_out) = L * gemm(T, out_w, b * (T * qh * d + T * H));
    const double up_cols = (model_.ffn_matrices() - 1) * F;  // gate + up, or up
    const double up_w = H * up_cols, down_w = F * H;
    at(Op::ffn_up) = L * gemm(T, up_w, b * (T * H + T * up_cols));
    at(Op::ffn_down) = L * gemm(T, down_w, b * (T * F + T * H));
    // Per token and layer, elements read + written: each norm 2H; residual adds 4H (one add of
    // three tensors, parallel attention) or 2 x 3H; the activation 2F (gelu) or 3F (silu x up).
    const double norms = model_.norms_per_layer * 2 * H;
    const double residual = model_.parallel_attention ? 4 * H : 6 * H;
    const double act = model_.ffn_kind == FfnKind::gelu ? 2 * F : 3 * F;
    at(Op::elementwise) = (L * T * (norms + residual + act) + T * 2 * H) * b / bandwidth;
    kernels += L * kernels_per_layer_ + 2;  // + embedding lookup, final norm

    if (tp) {
      // Ring all-reduce of [tokens, hidden] fp16: 2(p-1)/p of the message over each link,
      // 2(p-1) steps of link latency; once per layer with parallel attention, twice otherwise,
      // and once after the vocabulary-parallel embedding.
      const double one = 2 * (p - 1) / p * (T * H * b) / ring_bandwidth + 2 * (p - 1) * ring_latency;
      at(Op::all_reduce) = (L * (model_.parallel_attention ? 1 : 2) + 1) * one;
      kernels += 1;
    }
    if (s.logit_rows > 0) {
      const double rows = s.logit_rows, V = rank_.vocab_rows;
      const double w = V * H;
      at(Op::lm_head) = gemm(rows, w, b * rows * H + 4 * rows * V);  // fp32 logits
      kernels += 2;  // GEMM, sampling
      if (tp) {
        // All-gather of the fp32 logits rows so that rank 0 samples from the whole vocabulary.
        at(Op::lm_head) += (p - 1) / p * (rows * model_.vocab * 4) / ring_bandwidth + (p - 1) * ring_latency;
        kernels += 1;
      }
    }
    if (par_.stages() > 1) {
      // The hidden states cross each of the stages - 1 boundaries once, from every tensor rank
      // of a stage to its counterpart in the next (GPU g to g + stage_tp; a node holds GPUs
      // [i * per_node, (i + 1) * per_node)). The copies between GPUs of one node go in parallel
      // over their links; those between nodes share the network, and set the boundary's time
      // when there are any.
      const std::uint32_t t = par_.stage_tp;
      const double bytes = T * H * b;
      for (std::uint32_t st = 1; st < par_.stages(); ++st) {
        double over_network = 0;
        for (std::uint32_t k = 0; k < t; ++k) {
          const std::uint32_t from = (st - 1) * t + k, to = st * t + k;
          over_network += from / per_node != to / per_node;
        }
        at(Op::transfer) += over_network > 0 ? over_network * bytes / net_.bandwidth + net_.latency
                                             : bytes / link + hw_.link_latency;
      }
      kernels += par_.stages() - 1;
    }
  }
  if (s.swapped_blocks > 0 || s.copied_blocks > 0) {
    at(Op::kv_moves) = s.swapped_blocks * block_bytes_ / hw_.host_bandwidth +
                       s.copied_blocks * 2 * block_bytes_ / bandwidth;  // read + write
    kernels += (s.swapped_blocks > 0) + (s.copied_blocks > 0);
  }
  at(Op::launch) = kernels * hw_.kernel_launch;
  at(Op::host) = hw_.step_overhead;
  for (double t : c.by_op) c.seconds += t;
  return c;
}

}  // namespace actorlm::sim
