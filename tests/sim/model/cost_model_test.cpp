// The roofline cost model: one request's decode step against the formula written out here,
// monotonicity in the hardware's speeds over random batches, the quadratic prefill, one vs two
// all-reduces per layer, and the layer split. Then Hardware's optional terms (few-row GEMMs,
// the dequantizing pass, attention rates, the host's cost per step) and bytes per weight, each
// on a tiny model against numbers worked out by hand, each changing only its own operators.
#define BOOST_TEST_MODULE sim_cost_model
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "sim/model/cost_model.hpp"

#include <algorithm>
#include <map>
#include <cmath>
#include <random>

using namespace actorlm::sim;
namespace data = boost::unit_test::data;
namespace tt = boost::test_tools;

namespace {

const Catalogue& cat() { return Catalogue::builtin(); }

// One sequence decoding its next token after `c` positions, tensor parallel over p GPUs: every
// term of the roofline, written out independently of the model's code.
double decode_formula(const ModelPreset& m, const Hardware& hw, double p, double c) {
  const double F = hw.flops * hw.compute_efficiency, B = hw.bandwidth * hw.memory_efficiency;
  const double link = hw.link_bandwidth * hw.link_efficiency, lat = hw.link_latency;
  const double L = m.layers, H = m.hidden, d = m.head_dim;
  const double qh = m.heads / p, kvh = std::max(1.0, std::floor(m.kv_heads / p)), f = m.ffn / p;
  const double V = std::ceil(m.vocab / p);
  const bool gelu = m.ffn_kind == FfnKind::gelu;
  const double up_cols = gelu ? f : 2 * f;
  // Each GEMM at batch 1 reads its weights once (2 bytes each) and moves 2 bytes per input and
  // output element; FLOPs are 2 per weight.
  auto gemm = [&](double in, double out) { return std::max(2 * in * out / F, 2 * (in * out + in + out) / B); };
  double layer = gemm(H, (qh + 2 * kvh) * d) + gemm(qh * d, H) + gemm(H, up_cols) + gemm(f, H);
  layer += std::max(4 * qh * d * c / F, 2 * (c * 2 * kvh * d + 2 * qh * d) / B);  // attention
  const double residual = m.parallel_attention ? 4 * H : 6 * H;
  layer += (m.norms_per_layer * 2 * H + residual + (gelu ? 2 * f : 3 * f)) * 2 / B;
  const double all_reduces = m.parallel_attention ? 1 : 2;
  double t = L * layer + 2 * H * 2 / B;  // + final norm
  t += std::max(2 * V * H / F, (2 * (V * H + H) + 4 * V) / B);  // LM head, fp32 logits
  if (p > 1) {
    const double ring = 2 * (p - 1) / p * (2 * H) / link + 2 * (p - 1) * lat;
    t += (L * all_reduces + 1) * ring;                       // layers + embedding
    t += (p - 1) / p * (4 * m.vocab) / link + (p - 1) * lat;  // logits all-gather
  }
  // Kernels per layer: QKV, rotary/cache write, attention, output, up, activation, down, norms,
  // residual adds, all-reduces; per step: embedding, final norm, LM head, sampling (+ the
  // embedding's all-reduce and the gather).
  const double per_layer = 7 + m.norms_per_layer + (m.parallel_attention ? 1 : 2) + (p > 1 ? all_reduces : 0);
  const double kernels = L * per_layer + 4 + (p > 1 ? 2 : 0);
  return t + kernels * hw.kernel_launch;
}

StepShape decode_batch(std::uint32_t batch, std::uint32_t context) {
  StepShape s;
  for (std::uint32_t i = 0; i < batch; ++i) s.add(1, context, true);
  return s;
}

// A model small enough to work its costs out by hand. Weights per layer: QKV 64 x (4 + 2 x 2) x 16
// = 8192, output 4 x 16 x 64 = 4096, gate + up 64 x 256 = 16384, down 128 x 64 = 8192; LM head
// (tied) 100 x 64 = 6400.
ModelPreset tiny_model() {
  ModelPreset m;
  m.key = m.name = "tiny";
  m.family = actorlm::model::Family::llama;
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.ffn = 128;
  m.ffn_kind = FfnKind::swiglu;
  m.vocab = 100;
  m.norm = NormKind::rmsnorm;
  m.norms_per_layer = 2;
  m.tied_embeddings = true;
  m.max_context = 4096;
  return m;
}

// 5e11 FLOP/s and 5e10 bytes/s achievable; the optional terms absent.
Hardware tiny_hardware() {
  Hardware h;
  h.key = h.name = "tiny-gpu";
  h.memory_bytes = 1e12;
  h.flops = 1e12;
  h.compute_efficiency = 0.5;
  h.bandwidth = 1e11;
  h.memory_efficiency = 0.5;
  h.link_bandwidth = h.host_bandwidth = 1e10;
  h.kernel_launch = 1e-6;
  return h;
}

StepCost tiny_step(const Hardware& hw, const StepShape& s, const ModelPreset& m = tiny_model()) {
  return CostModel(m, hw, {ParallelKind::tensor, 1}, 16).step(s);
}

StepShape tiny_prefill(std::uint32_t tokens) {
  StepShape s;
  s.add(tokens, tokens, true);
  return s;
}

// `got` has the seconds in `changed` for those operators and `base`'s for every other one, and
// its total is the sum of its operators.
void check_changes_only(const StepCost& got, const StepCost& base, const std::map<Op, double>& changed) {
  double sum = 0;
  for (std::size_t i = 0; i < op_count; ++i) {
    const Op op = static_cast<Op>(i);
    const auto it = changed.find(op);
    const double want = it != changed.end() ? it->second : base[op];
    BOOST_TEST(got[op] == want, tt::tolerance(1e-12) << to_string(op));
    sum += want;
  }
  BOOST_TEST(got.seconds == sum, tt::tolerance(1e-12));
}

// A decode step of 8 sequences at context 100 (T = 8 rows, 800 KV positions) on tiny_hardware(),
// without optional terms: every GEMM is memory-bound, its seconds L x (2 w + 2 (rows x (in + out)))
// / 5e10 (L = 2; the LM head once, with 4-byte logits).
namespace decode8 {
constexpr double qkv = 2 * (2 * 8192 + 2 * (8 * 64 + 8 * 128)) / 5e10;     // 19456 bytes
constexpr double out = 2 * (2 * 4096 + 2 * (8 * 64 + 8 * 64)) / 5e10;      // 10240 bytes
constexpr double up = 2 * (2 * 16384 + 2 * (8 * 64 + 8 * 256)) / 5e10;     // 37888 bytes
constexpr double down = 2 * (2 * 8192 + 2 * (8 * 128 + 8 * 64)) / 5e10;    // 19456 bytes
constexpr double lm_head = (2 * 6400 + 2 * 8 * 64 + 4 * 8 * 100) / 5e10;   // 17024 bytes
// The same GEMMs on few-row kernels at 1e9 FLOP/s: compute-bound, 2 x rows x w FLOPs.
constexpr double few_qkv = 2 * (2 * 8 * 8192) / 1e9;
constexpr double few_out = 2 * (2 * 8 * 4096) / 1e9;
constexpr double few_up = 2 * (2 * 8 * 16384) / 1e9;
constexpr double few_down = 2 * (2 * 8 * 8192) / 1e9;
constexpr double few_lm_head = (2 * 8 * 6400) / 1e9;
}  // namespace decode8

}  // namespace

BOOST_DATA_TEST_CASE(one_decode_step_equals_the_roofline_formula,
                     data::make({"falcon-40b", "falcon-7b", "llama-2-7b", "llama-2-70b", "smollm2-135m"}) *
                         data::make({"a10g", "a100-80gb", "h100-sxm"}) * data::make({1u, 8u}) *
                         data::make({1u, 300u, 2000u}),
                     model, gpu, degree, context) {
  const ModelPreset& m = cat().model(model);
  const Hardware& hw = cat().hardware(gpu);
  if (m.heads % degree != 0) return;  // Falcon-7B's 71 heads: TP 1 only (tested in the memory model)
  const CostModel cost(m, hw, {ParallelKind::tensor, degree}, 16);
  const double modelled = cost.step_seconds(decode_batch(1, context));
  BOOST_TEST(modelled == decode_formula(m, hw, degree, context), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_decode_step_is_bound_by_reading_the_weights) {
  // Falcon-40B on A10G: a decode step cannot beat streaming each GPU's weights once.
  const ModelPreset& m = cat().model("falcon-40b");
  const Hardware& hw = cat().hardware("a10g");
  for (std::uint32_t tp : {4u, 8u}) {
    const CostModel cost(m, hw, {ParallelKind::tensor, tp}, 16);
    const double weights_s = 2.0 * m.params() / tp / (hw.bandwidth * hw.memory_efficiency);
    for (std::uint32_t batch : {1u, 32u}) {
      const StepCost c = cost.step(decode_batch(batch, 160));
      BOOST_TEST_MESSAGE("Falcon-40B TP " << tp << " on A10G, decode batch " << batch << " at context 160: "
                                          << c.seconds * 1e3 << " ms (weights alone " << weights_s * 1e3
                                          << " ms, all-reduce " << c[Op::all_reduce] * 1e3 << " ms, launch "
                                          << c[Op::launch] * 1e3 << " ms)");
      BOOST_TEST(c.seconds > 0.98 * weights_s);
      BOOST_TEST(c.seconds < 1.8 * weights_s);  // PCIe all-reduces and launches add the rest
    }
    StepShape prefill;
    prefill.add(1024, 1024, true);
    BOOST_TEST_MESSAGE("Falcon-40B TP " << tp << " on A10G, prefill of 1024 tokens: "
                                        << cost.step_seconds(prefill) * 1e3 << " ms");
  }
}

BOOST_AUTO_TEST_CASE(more_bandwidth_or_flops_never_makes_a_step_slower) {
  std::mt19937_64 rng(20240611);
  const ModelPreset& m = cat().model("llama-2-70b");
  const Hardware base = cat().hardware("a10g");
  for (int trial = 0; trial < 2000; ++trial) {
    StepShape s;
    const int seqs = std::uniform_int_distribution<int>(0, 64)(rng);
    for (int i = 0; i < seqs; ++i) {
      const auto n = std::uniform_int_distribution<std::uint32_t>(1, 600)(rng);
      const auto ctx = n + std::uniform_int_distribution<std::uint32_t>(0, 3000)(rng) * (n == 1);
      s.add(n, ctx, rng() % 4 != 0);
    }
    s.swapped_blocks = rng() % 3;
    s.copied_blocks = rng() % 3;
    const std::uint32_t tp = 1u << (rng() % 4);
    const Parallelism p{rng() % 2 ? ParallelKind::tensor : ParallelKind::layers, tp};
    Hardware faster = base;
    const auto gain = [&] { return 1.0 + std::uniform_real_distribution<double>(0, 3)(rng) * (rng() % 2); };
    faster.bandwidth *= gain();
    faster.flops *= gain();
    faster.link_bandwidth *= gain();
    faster.host_bandwidth *= gain();
    faster.compute_efficiency = std::min(1.0, faster.compute_efficiency * gain());
    const double slow = CostModel(m, base, p, 16).step_seconds(s);
    const double fast = CostModel(m, faster, p, 16).step_seconds(s);
    BOOST_TEST(fast <= slow, "trial " << trial);
  }
}

BOOST_AUTO_TEST_CASE(prefill_pairs_follow_the_causal_mask_across_chunks) {
  StepShape whole, chunks;
  whole.add(100, 100, true);
  BOOST_TEST(whole.prefill_pairs == 100.0 * 101 / 2);  // query i sees i + 1 positions
  chunks.add(60, 60, false);
  chunks.add(40, 100, true);
  BOOST_TEST(chunks.prefill_pairs == whole.prefill_pairs);
  BOOST_TEST(chunks.logit_rows == 1u);
  // Quadratic: four times the prompt, about sixteen times the attention FLOPs.
  const CostModel cost(cat().model("llama-2-7b"), cat().hardware("a100-80gb"), {ParallelKind::tensor, 1}, 16);
  StepShape longer;
  longer.add(4000, 4000, true);
  StepShape shorter;
  shorter.add(1000, 1000, true);
  const double ratio = cost.step(longer)[Op::attention_prefill] / cost.step(shorter)[Op::attention_prefill];
  BOOST_TEST(ratio == 16.0, tt::tolerance(0.01));
}

BOOST_AUTO_TEST_CASE(parallel_attention_needs_one_all_reduce_per_layer_sequential_blocks_two) {
  ModelPreset parallel = cat().model("falcon-40b");
  ModelPreset sequential = parallel;
  sequential.parallel_attention = false;
  const Hardware& hw = cat().hardware("a10g");
  const StepShape s = decode_batch(8, 200);
  const double one = CostModel(parallel, hw, {ParallelKind::tensor, 4}, 16).step(s)[Op::all_reduce];
  const double two = CostModel(sequential, hw, {ParallelKind::tensor, 4}, 16).step(s)[Op::all_reduce];
  BOOST_TEST(two / one == (2.0 * 60 + 1) / (60 + 1), tt::tolerance(1e-12));  // + the embedding's
  BOOST_TEST(CostModel(parallel, hw, {ParallelKind::tensor, 1}, 16).step(s)[Op::all_reduce] == 0);
}

BOOST_AUTO_TEST_CASE(a_layer_split_runs_one_gpu_at_a_time_and_copies_activations_between_them) {
  const ModelPreset& m = cat().model("falcon-40b");
  const Hardware& hw = cat().hardware("a10g");
  const StepShape s = decode_batch(4, 300);
  const StepCost one = CostModel(m, hw, {ParallelKind::tensor, 1}, 16).step(s);
  const StepCost split = CostModel(m, hw, {ParallelKind::layers, 4}, 16).step(s);
  BOOST_TEST(split[Op::all_reduce] == 0);
  const double transfer = 3 * (4.0 * m.hidden * 2 / (hw.link_bandwidth * hw.link_efficiency) + hw.link_latency);
  BOOST_TEST(split[Op::transfer] == transfer, tt::tolerance(1e-12));
  // The same layers' work as on one (large enough) GPU, plus the copies and their launches.
  BOOST_TEST(split.seconds == one.seconds + transfer + 3 * hw.kernel_launch, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_tensor_parallel_ring_over_two_nodes_moves_at_the_pace_of_the_network) {
  const ModelPreset& m = cat().model("falcon-40b");
  const Hardware& hw = cat().hardware("a10g");
  const Network net = Network::of(cat().instance("g5.12xlarge"));
  BOOST_TEST(net.bandwidth == 40e9 / 8 * 0.7, tt::tolerance(1e-12));
  const StepShape s = decode_batch(8, 200);
  const StepCost one = CostModel(m, hw, {ParallelKind::tensor, 8}, 16).step(s);
  const StepCost two = CostModel(m, hw, {ParallelKind::tensor, 8, 2}, 16, net).step(s);
  // 8 tokens x hidden 8192 in fp16 per all-reduce, 2 x 7 ring steps of an eighth each, their
  // pace set by the network hop; once per layer (parallel attention) and once for the embedding.
  const double message = 8.0 * 8192 * 2;
  const double ring = 2 * 7.0 / 8 * message / net.bandwidth + 2 * 7 * std::max(hw.link_latency, net.latency);
  BOOST_TEST(two[Op::all_reduce] == (60 + 1) * ring, tt::tolerance(1e-12));
  BOOST_TEST(two[Op::all_reduce] > one[Op::all_reduce]);
  // The gathered logits cross it too; the GPUs' own work does not change.
  BOOST_TEST(two[Op::lm_head] > one[Op::lm_head]);
  for (Op op : {Op::qkv, Op::attention_decode, Op::ffn_up, Op::ffn_down, Op::elementwise, Op::launch})
    BOOST_TEST(two[op] == one[op], to_string(op));
  // One node is the single-node model whatever network is given.
  BOOST_TEST(CostModel(m, hw, {ParallelKind::tensor, 8, 1}, 16, net).step(s).seconds == one.seconds);
}

BOOST_AUTO_TEST_CASE(a_layer_split_over_two_nodes_crosses_the_network_at_one_stage_boundary) {
  const ModelPreset& m = cat().model("falcon-40b");
  const Hardware& hw = cat().hardware("a10g");
  const Network net{5e8, 30e-6};
  const StepShape s = decode_batch(4, 300);
  const StepCost split = CostModel(m, hw, {ParallelKind::layers, 8, 2}, 16, net).step(s);
  const double bytes = 4.0 * m.hidden * 2;
  const double transfer = 6 * (bytes / (hw.link_bandwidth * hw.link_efficiency) + hw.link_latency) +
                          1 * (bytes / net.bandwidth + net.latency);
  BOOST_TEST(split[Op::transfer] == transfer, tt::tolerance(1e-12));
  BOOST_TEST(split[Op::all_reduce] == 0);
}

BOOST_AUTO_TEST_CASE(two_stages_of_tp_4_on_two_nodes_reduce_within_a_node_and_cross_the_network_once) {
  const ModelPreset& m = cat().model("falcon-40b");
  const Hardware& hw = cat().hardware("a10g");
  const Network net = Network::of(cat().instance("g5.12xlarge"));
  const StepShape s = decode_batch(8, 200);
  const StepCost tp4 = CostModel(m, hw, {ParallelKind::tensor, 4}, 16).step(s);
  Parallelism hybrid{ParallelKind::layers, 8, 2};
  hybrid.stage_tp = 4;
  BOOST_TEST(hybrid.stages() == 2u);
  BOOST_TEST(hybrid.tensor_degree() == 4u);
  BOOST_TEST(label(hybrid) == "2 stages of TP 4");
  const StepCost split = CostModel(m, hw, hybrid, 16, net).step(s);
  // Every layer runs at TP 4 as on one g5.12xlarge, its all-reduces on the node's own links...
  for (Op op : {Op::qkv, Op::attention_decode, Op::ffn_up, Op::ffn_down, Op::elementwise, Op::all_reduce, Op::lm_head})
    BOOST_TEST(split[op] == tp4[op], to_string(op));
  // ...and the 4 tensor ranks of stage 0 each send the step's hidden states to their
  // counterparts over the one network.
  const double transfer = 4 * (8.0 * m.hidden * 2) / net.bandwidth + net.latency;
  BOOST_TEST(split[Op::transfer] == transfer, tt::tolerance(1e-12));
  BOOST_TEST(split[Op::launch] == tp4[Op::launch] + hw.kernel_launch, tt::tolerance(1e-12));
  // On one node the boundary is a local link.
  hybrid.nodes = 1;
  const double local = 8.0 * m.hidden * 2 / (hw.link_bandwidth * hw.link_efficiency) + hw.link_latency;
  BOOST_TEST(CostModel(m, hw, hybrid, 16).step(s)[Op::transfer] == local, tt::tolerance(1e-12));
  hybrid.stage_tp = 3;  // 8 GPUs do not make stages of 3
  BOOST_CHECK_THROW(CostModel(m, hw, hybrid, 16), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_stage_straddling_two_nodes_reduces_over_the_network_and_its_crossing_ranks_hand_over_there) {
  // TP 2 x 3 stages on 2 nodes of 3 GPUs: stage 1 holds GPU 2 (node 0) and GPU 3 (node 1).
  const ModelPreset& m = cat().model("falcon-40b");
  const Hardware& hw = cat().hardware("a10g");
  const Network net{5e8, 30e-6};
  const StepShape s = decode_batch(4, 300);
  Parallelism straddling{ParallelKind::layers, 6, 2};
  straddling.stage_tp = 2;
  const StepCost c = CostModel(m, hw, straddling, 16, net).step(s);
  const StepCost local = CostModel(m, hw, {ParallelKind::tensor, 2}, 16).step(s);
  BOOST_TEST(c[Op::all_reduce] > local[Op::all_reduce]);  // the straddling stage's ring crosses the network
  // Each boundary has one rank pair on different nodes: GPU 1 -> 3 at the first (0 -> 2 stays
  // on node 0), GPU 2 -> 4 at the second (3 -> 5 stays on node 1).
  const double bytes = 4.0 * m.hidden * 2;
  BOOST_TEST(c[Op::transfer] == 2 * (bytes / net.bandwidth + net.latency), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_parallelism_over_nodes_needs_a_network_and_as_many_gpus_on_each) {
  const ModelPreset& m = cat().model("falcon-40b");
  const Hardware& hw = cat().hardware("a10g");
  BOOST_CHECK_THROW(CostModel(m, hw, {ParallelKind::tensor, 8, 2}, 16), std::invalid_argument);
  BOOST_CHECK_THROW(CostModel(m, hw, {ParallelKind::tensor, 6, 4}, 16, Network{1e9, 1e-5}), std::invalid_argument);
  BOOST_CHECK_THROW(CostModel(m, hw, {ParallelKind::tensor, 8, 0}, 16, Network{1e9, 1e-5}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(swapped_blocks_cross_the_host_link) {
  const ModelPreset& m = cat().model("llama-2-7b");
  const Hardware& hw = cat().hardware("a10g");
  const CostModel cost(m, hw, {ParallelKind::tensor, 2}, 16);
  StepShape s;
  s.swapped_blocks = 10;
  const double block = 2.0 * 32 * 16 * 128 * 2 * 16;  // K+V, 32 layers, 16 KV heads per rank
  BOOST_TEST(cost.step(s)[Op::kv_moves] == 10 * block / hw.host_bandwidth, tt::tolerance(1e-12));
  BOOST_TEST(cost.step(StepShape{}).seconds == 0);
}

BOOST_AUTO_TEST_CASE(the_breakdown_sums_to_the_step_time) {
  StepShape s = decode_batch(16, 700);
  s.add(300, 300, true);
  const StepCost c = CostModel(cat().model("llama-3-8b"), cat().hardware("l4"), {ParallelKind::tensor, 2}, 16).step(s);
  double sum = 0;
  for (std::size_t i = 0; i < op_count; ++i) sum += c.by_op[i];
  BOOST_TEST(sum == c.seconds, tt::tolerance(1e-12));
  BOOST_TEST(c[Op::attention_prefill] > 0);
  BOOST_TEST(c[Op::attention_decode] > 0);
  BOOST_TEST(to_string(Op::all_reduce) == "all_reduce");
}

BOOST_AUTO_TEST_CASE(without_optional_terms_a_tiny_decode_step_is_the_roofline_worked_out_by_hand) {
  const StepCost c = tiny_step(tiny_hardware(), decode_batch(8, 100));
  BOOST_TEST(c[Op::qkv] == decode8::qkv, tt::tolerance(1e-12));
  BOOST_TEST(c[Op::attention_out] == decode8::out, tt::tolerance(1e-12));
  BOOST_TEST(c[Op::ffn_up] == decode8::up, tt::tolerance(1e-12));
  BOOST_TEST(c[Op::ffn_down] == decode8::down, tt::tolerance(1e-12));
  BOOST_TEST(c[Op::lm_head] == decode8::lm_head, tt::tolerance(1e-12));
  // Decode attention, memory-bound: K and V of 800 positions x 2 KV heads x 16, plus Q and O.
  BOOST_TEST(c[Op::attention_decode] == 2 * 2 * (800 * 2 * 2 * 16 + 2 * 8 * 4 * 16) / 5e10, tt::tolerance(1e-12));
  BOOST_TEST(c[Op::host] == 0);
}

BOOST_AUTO_TEST_CASE(a_partial_overlap_adds_the_unhidden_share_of_the_shorter_side_to_the_longer) {
  // decode8's GEMMs are memory-bound at 5e11 FLOP/s (their arithmetic the shorter side) and
  // compute-bound on few-row kernels at 1e9 FLOP/s (their memory traffic the shorter side).
  Hardware hw = tiny_hardware();
  const auto tol = tt::tolerance(1e-12);
  for (const double overlap : {0.0, 0.25, 0.6, 1.0}) {
    hw.memory_overlap = overlap;
    hw.small_gemm_rows = 0;
    const StepCost c = tiny_step(hw, decode_batch(8, 100));
    BOOST_TEST(c[Op::qkv] == decode8::qkv + (1 - overlap) * 2 * (2 * 8 * 8192) / 5e11, tol);
    BOOST_TEST(c[Op::lm_head] == decode8::lm_head + (1 - overlap) * (2 * 8 * 6400) / 5e11, tol);
    hw.small_gemm_rows = 9;
    hw.small_gemm_flops = 1e9;
    const StepCost few = tiny_step(hw, decode_batch(8, 100));
    BOOST_TEST(few[Op::qkv] == decode8::few_qkv + (1 - overlap) * decode8::qkv, tol);
    BOOST_TEST(few[Op::ffn_up] == decode8::few_up + (1 - overlap) * decode8::up, tol);
    // Between the roofline (1) and the sum (0), a step's time falls as the overlap grows.
    if (overlap > 0) {
      hw.memory_overlap = overlap / 2;
      BOOST_TEST(tiny_step(hw, decode_batch(8, 100)).seconds > few.seconds);
    }
  }
}

BOOST_AUTO_TEST_CASE(without_overlap_a_kernel_takes_its_arithmetic_plus_its_memory_traffic) {
  // The cpu backend's kernels read, then compute: each GEMM and the attention cost the compute
  // side of the roofline (5e11 FLOP/s, 2 layers) plus its memory side (decode8, at 5e10 B/s).
  Hardware hw = tiny_hardware();
  const StepCost base = tiny_step(hw, decode_batch(8, 100));
  hw.memory_overlap = 0;
  const auto tol = tt::tolerance(1e-12);
  const StepCost c = tiny_step(hw, decode_batch(8, 100));
  BOOST_TEST(c[Op::qkv] == 2 * (2 * 8 * 8192) / 5e11 + decode8::qkv, tol);
  BOOST_TEST(c[Op::attention_out] == 2 * (2 * 8 * 4096) / 5e11 + decode8::out, tol);
  BOOST_TEST(c[Op::ffn_up] == 2 * (2 * 8 * 16384) / 5e11 + decode8::up, tol);
  BOOST_TEST(c[Op::ffn_down] == 2 * (2 * 8 * 8192) / 5e11 + decode8::down, tol);
  BOOST_TEST(c[Op::lm_head] == (2 * 8 * 6400) / 5e11 + decode8::lm_head, tol);
  // 4 d FLOPs per cached position and query head: 4 x 16 x 4 heads x 800 positions per layer.
  BOOST_TEST(c[Op::attention_decode] == 2 * (4.0 * 16 * 4 * 800) / 5e11 + base[Op::attention_decode], tol);
  BOOST_TEST(c[Op::elementwise] == base[Op::elementwise], tol);  // memory alone either way
  BOOST_TEST(c[Op::launch] == base[Op::launch], tol);
  // Few-row kernels at 1e9 FLOP/s: their arithmetic plus the same bytes.
  hw.small_gemm_rows = 9;
  hw.small_gemm_flops = 1e9;
  const StepCost few = tiny_step(hw, decode_batch(8, 100));
  BOOST_TEST(few[Op::qkv] == decode8::few_qkv + decode8::qkv, tol);
  BOOST_TEST(few[Op::ffn_down] == decode8::few_down + decode8::down, tol);
  BOOST_TEST(few[Op::lm_head] == decode8::few_lm_head + decode8::lm_head, tol);
}

struct SmallRows {
  std::uint32_t small_gemm_rows;
  bool few;  // 8 rows < small_gemm_rows
};
std::ostream& operator<<(std::ostream& os, const SmallRows& r) { return os << "small_gemm_rows " << r.small_gemm_rows; }
const SmallRows small_rows_cases[] = {{4, false}, {8, false}, {9, true}, {32, true}};

BOOST_DATA_TEST_CASE(gemms_of_fewer_rows_than_small_gemm_rows_run_at_the_small_gemm_rate, small_rows_cases, r) {
  Hardware hw = tiny_hardware();
  const StepCost base = tiny_step(hw, decode_batch(8, 100));
  hw.small_gemm_rows = r.small_gemm_rows;
  hw.small_gemm_flops = 1e9;  // as given: no compute_efficiency on it
  const StepCost got = tiny_step(hw, decode_batch(8, 100));
  if (r.few)
    check_changes_only(got, base,
                       {{Op::qkv, decode8::few_qkv}, {Op::attention_out, decode8::few_out}, {Op::ffn_up, decode8::few_up},
                        {Op::ffn_down, decode8::few_down}, {Op::lm_head, decode8::few_lm_head}});
  else
    check_changes_only(got, base, {});
}

BOOST_AUTO_TEST_CASE(a_few_row_gemm_is_still_bound_by_reading_its_weights_and_activations) {
  // A 64-token prefill below small_gemm_rows 128, few-row kernels at 1e15 FLOP/s: each GEMM is
  // its bytes / 5e10, where the roofline (5e11 FLOP/s) would be compute-bound.
  Hardware hw = tiny_hardware();
  const StepCost base = tiny_step(hw, tiny_prefill(64));
  BOOST_TEST(base[Op::qkv] == 2 * (2 * 64 * 8192) / 5e11, tt::tolerance(1e-12));
  hw.small_gemm_rows = 128;
  hw.small_gemm_flops = 1e15;
  check_changes_only(tiny_step(hw, tiny_prefill(64)), base,
                     {{Op::qkv, 2 * (2 * 8192 + 2 * (64 * 64 + 64 * 128)) / 5e10},
                      {Op::attention_out, 2 * (2 * 4096 + 2 * (64 * 64 + 64 * 64)) / 5e10},
                      {Op::ffn_up, 2 * (2 * 16384 + 2 * (64 * 64 + 64 * 256)) / 5e10},
                      {Op::ffn_down, 2 * (2 * 8192 + 2 * (64 * 128 + 64 * 64)) / 5e10},
                      {Op::lm_head, (2 * 6400 + 2 * 64 + 4 * 100) / 5e10}});
}

BOOST_AUTO_TEST_CASE(the_lm_head_counts_its_sampling_rows_not_the_steps_tokens) {
  // A 64-token prefill with small_gemm_rows 32: the layers' GEMMs have 64 rows (the roofline),
  // the LM head one (the few-row kernel, 2 x 6400 FLOPs at 1e9 FLOP/s).
  Hardware hw = tiny_hardware();
  const StepCost base = tiny_step(hw, tiny_prefill(64));
  hw.small_gemm_rows = 32;
  hw.small_gemm_flops = 1e9;
  check_changes_only(tiny_step(hw, tiny_prefill(64)), base, {{Op::lm_head, 2 * 6400 / 1e9}});
}

BOOST_AUTO_TEST_CASE(gemms_of_small_gemm_rows_or_more_add_a_pass_over_their_weights_at_the_dequant_rate) {
  Hardware hw = tiny_hardware();
  const StepCost base = tiny_step(hw, decode_batch(8, 100));
  hw.gemm_weight_rate = 1e9;  // weights/s
  // Every GEMM pays w / 1e9 on top of its roofline, with or without few-row kernels below 8 rows.
  const std::map<Op, double> with_pass = {{Op::qkv, decode8::qkv + 2 * 8192 / 1e9},
                                          {Op::attention_out, decode8::out + 2 * 4096 / 1e9},
                                          {Op::ffn_up, decode8::up + 2 * 16384 / 1e9},
                                          {Op::ffn_down, decode8::down + 2 * 8192 / 1e9},
                                          {Op::lm_head, decode8::lm_head + 6400 / 1e9}};
  check_changes_only(tiny_step(hw, decode_batch(8, 100)), base, with_pass);
  hw.small_gemm_rows = 8;
  hw.small_gemm_flops = 1e9;
  check_changes_only(tiny_step(hw, decode_batch(8, 100)), base, with_pass);
  // Few-row GEMMs read their weights as stored: no pass.
  hw.small_gemm_rows = 32;
  check_changes_only(tiny_step(hw, decode_batch(8, 100)), base,
                     {{Op::qkv, decode8::few_qkv}, {Op::attention_out, decode8::few_out}, {Op::ffn_up, decode8::few_up},
                      {Op::ffn_down, decode8::few_down}, {Op::lm_head, decode8::few_lm_head}});
}

BOOST_AUTO_TEST_CASE(gemms_of_large_batch_rows_or_more_run_at_the_large_batch_rate) {
  // A 64-token prefill: the layers' GEMMs have 64 rows, the LM head 1 (it samples one row).
  Hardware hw = tiny_hardware();
  const StepCost base = tiny_step(hw, tiny_prefill(64));
  hw.large_batch_rows = 65;
  hw.large_batch_flops = 1e9;
  check_changes_only(tiny_step(hw, tiny_prefill(64)), base, {});  // 64 rows < 65
  // From 64 rows on, 2 layers x 2 x 64 x w FLOPs at 1e9 FLOP/s (as given: no compute_efficiency),
  // far above each GEMM's bytes / bandwidth.
  hw.large_batch_rows = 64;
  check_changes_only(tiny_step(hw, tiny_prefill(64)), base,
                     {{Op::qkv, 2 * (2 * 64 * 8192) / 1e9},
                      {Op::attention_out, 2 * (2 * 64 * 4096) / 1e9},
                      {Op::ffn_up, 2 * (2 * 64 * 16384) / 1e9},
                      {Op::ffn_down, 2 * (2 * 64 * 8192) / 1e9}});
}

// A 64-token prefill: 64 x 64 - 64 x 63 / 2 = 2080 (query, key) pairs, 4 x 4 heads x 16 x 2080
// = 532480 FLOPs per layer; its bytes, Q and O of 64 tokens and K and V of 64 positions, 24576.
constexpr double prefill64_attention_flops = 4.0 * 4 * 16 * 2080;
// A decode of 8 at context 100: 4 x 4 x 16 x 800 = 204800 FLOPs per layer.
constexpr double decode8_attention_flops = 4.0 * 4 * 16 * 800;

BOOST_AUTO_TEST_CASE(decode_attention_runs_at_attention_flops_and_prefill_follows_it_unless_given_its_own) {
  Hardware hw = tiny_hardware();
  const StepCost base_decode = tiny_step(hw, decode_batch(8, 100));
  const StepCost base_prefill = tiny_step(hw, tiny_prefill(64));
  BOOST_TEST(base_prefill[Op::attention_prefill] == 2 * prefill64_attention_flops / 5e11, tt::tolerance(1e-12));
  hw.attention_flops = 1e9;  // as given: no compute_efficiency on it
  check_changes_only(tiny_step(hw, decode_batch(8, 100)), base_decode,
                     {{Op::attention_decode, 2 * decode8_attention_flops / 1e9}});
  check_changes_only(tiny_step(hw, tiny_prefill(64)), base_prefill,
                     {{Op::attention_prefill, 2 * prefill64_attention_flops / 1e9}});
}

BOOST_AUTO_TEST_CASE(prefill_attention_flops_changes_only_prefill_attention) {
  Hardware hw = tiny_hardware();
  const StepCost base_decode = tiny_step(hw, decode_batch(8, 100));
  const StepCost base_prefill = tiny_step(hw, tiny_prefill(64));
  hw.prefill_attention_flops = 1e9;
  check_changes_only(tiny_step(hw, tiny_prefill(64)), base_prefill,
                     {{Op::attention_prefill, 2 * prefill64_attention_flops / 1e9}});
  check_changes_only(tiny_step(hw, decode_batch(8, 100)), base_decode, {});
  // In one step, each kind of attention at its own rate.
  hw.attention_flops = 4e9;
  StepShape mixed = decode_batch(8, 100);
  mixed.add(64, 64, true);
  const StepCost c = tiny_step(hw, mixed);
  BOOST_TEST(c[Op::attention_prefill] == 2 * prefill64_attention_flops / 1e9, tt::tolerance(1e-12));
  BOOST_TEST(c[Op::attention_decode] == 2 * decode8_attention_flops / 4e9, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(bytes_per_weight_changes_only_the_weights_share_of_memory_traffic) {
  ModelPreset quantized = tiny_model();
  quantized.weight_bytes = 0.5;
  const Hardware hw = tiny_hardware();
  // One decode sequence: every GEMM memory-bound, 0.5 w + 2 (in + out) bytes.
  check_changes_only(tiny_step(hw, decode_batch(1, 100), quantized), tiny_step(hw, decode_batch(1, 100)),
                     {{Op::qkv, 2 * (0.5 * 8192 + 2 * (64 + 128)) / 5e10},
                      {Op::attention_out, 2 * (0.5 * 4096 + 2 * (64 + 64)) / 5e10},
                      {Op::ffn_up, 2 * (0.5 * 16384 + 2 * (64 + 256)) / 5e10},
                      {Op::ffn_down, 2 * (0.5 * 8192 + 2 * (128 + 64)) / 5e10},
                      {Op::lm_head, (0.5 * 6400 + 2 * 64 + 4 * 100) / 5e10}});
  // A 512-token prefill: the layers' GEMMs are compute-bound and do not change; the one-row LM
  // head still reads its weights.
  check_changes_only(tiny_step(hw, tiny_prefill(512), quantized), tiny_step(hw, tiny_prefill(512)),
                     {{Op::lm_head, (0.5 * 6400 + 2 * 64 + 4 * 100) / 5e10}});
}

BOOST_AUTO_TEST_CASE(step_overhead_is_charged_once_per_step_to_the_host) {
  Hardware hw = tiny_hardware();
  const StepCost base = tiny_step(hw, decode_batch(8, 100));
  hw.step_overhead = 2.5e-4;
  const StepCost got = tiny_step(hw, decode_batch(8, 100));
  check_changes_only(got, base, {{Op::host, 2.5e-4}});
  BOOST_TEST(got.seconds == base.seconds + 2.5e-4, tt::tolerance(1e-12));
  BOOST_TEST(tiny_step(hw, tiny_prefill(512))[Op::host] == 2.5e-4);  // whatever the step's size
  BOOST_TEST(to_string(Op::host) == "host");
}
