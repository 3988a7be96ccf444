// The roofline cost model: one request's decode step against the formula written out here,
// monotonicity in the hardware's speeds over random batches, the quadratic prefill, one vs two
// all-reduces per layer, and the layer split.
#define BOOST_TEST_MODULE sim_cost_model
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "sim/model/cost_model.hpp"

#include <algorithm>
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
