// The cuda forward's branch region (kernels/cuda/model/branch_layout.hpp) over random shapes:
// in every step of a layer, the intermediates live at once lie inside the region and apart; and
// for a model on one GPU the region is within the memory plan's estimate of one layer's
// intermediates (sim/model/memory_model.cpp: QKV and attention output, or the MLP's, the larger;
// parallel branches both, checked here against the larger alone), up to the alignment, so the
// plan's activation workspace holds it. (Not so under tensor parallelism, where the projection
// and the MLP's output are whole hidden rows, nor with a decode workspace past the MLP's share.)
#define BOOST_TEST_MODULE branch_layout
#include <boost/test/unit_test.hpp>

#include "kernels/cuda/model/branch_layout.hpp"

#include <random>
#include <string>
#include <vector>

using namespace actorlm::kernels::cuda;

namespace {

struct Span {
  const char* name;
  std::size_t at, bytes;
};

// The groups of intermediates live at once, in the forward's order (branch_layout.hpp).
std::vector<std::vector<Span>> live_groups(const BranchShape& s, const BranchLayout& l, std::size_t tokens,
                                           std::size_t workspace) {
  const auto b = [&](std::size_t width) { return tokens * width * s.elem_bytes; };
  const Span qkv{"qkv", l.qkv, b(s.qkv_width)}, q{"q", l.q, b(s.q_width)}, attn{"attn", l.attn, b(s.q_width)},
      ws{"workspace", l.workspace, workspace}, act{"act", l.act, b(s.ffn_columns)},
      mlp_out{"mlp_out", l.mlp_out, b(s.hidden)};
  std::vector<std::vector<Span>> g{{qkv, q}, {q, attn, ws}, {act, mlp_out}, {mlp_out}};
  if (!s.parallel) g.push_back({attn, {"proj", l.proj, b(s.hidden)}});
  if (s.gated) g.push_back({{"up", l.up, b(2 * s.ffn_columns)}, act});
  return g;
}

}  // namespace

BOOST_AUTO_TEST_CASE(intermediates_live_at_once_never_overlap_and_stay_inside_the_region) {
  std::mt19937_64 rng(7);
  const auto pick = [&](std::size_t lo, std::size_t hi) { return lo + rng() % (hi - lo + 1); };
  for (int trial = 0; trial < 20000; ++trial) {
    BranchShape s;
    const std::size_t hd = pick(0, 1) ? 64 : 128, kv = pick(1, 8), q = kv * pick(1, 8), tp = pick(1, 8);
    s.hidden = q * hd * tp;  // the whole hidden size; the rank holds a 1/tp share of the heads
    s.q_width = q * hd;
    s.qkv_width = (q + 2 * kv) * hd;
    s.ffn_columns = pick(1, 4 * s.hidden / tp + 64);
    s.elem_bytes = pick(0, 1) ? 2 : 4;
    s.gated = pick(0, 1);
    s.parallel = pick(0, 1);
    const std::size_t tokens = pick(1, 600), workspace = pick(0, 1) ? 0 : pick(1, 1 << 20);
    const BranchLayout l = branch_layout(s, tokens, workspace);
    BOOST_TEST_REQUIRE((l.proj == npos_offset) == s.parallel);
    BOOST_TEST_REQUIRE((l.up == npos_offset) == !s.gated);
    for (const auto& group : live_groups(s, l, tokens, workspace)) {
      for (std::size_t i = 0; i < group.size(); ++i) {
        BOOST_TEST_REQUIRE(group[i].at % 256 == 0u, group[i].name);
        BOOST_TEST_REQUIRE(group[i].at + group[i].bytes <= l.bytes, group[i].name << " past the region");
        for (std::size_t j = i + 1; j < group.size(); ++j) {
          const bool apart = group[i].at + group[i].bytes <= group[j].at || group[j].at + group[j].bytes <= group[i].at;
          BOOST_TEST_REQUIRE(apart, group[i].name << " overlaps " << group[j].name << " (trial " << trial << ")");
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(on_one_gpu_the_region_is_the_plans_estimate_of_one_layers_intermediates) {
  // SmolLM2-135M, Llama-3-8B (gated, sequential) and Falcon-7B (GELU, parallel, whose projection
  // lies outside), bf16, 8,192 tokens, no decode workspace.
  struct Model {
    const char* name;
    std::size_t hidden, heads, kv_heads, head_dim, ffn;
    bool gated, parallel;
  };
  for (const Model& m : {Model{"SmolLM2-135M", 576, 9, 3, 64, 1536, true, false},
                         Model{"Llama-3-8B", 4096, 32, 8, 128, 14336, true, false},
                         Model{"Falcon-7B", 4544, 71, 1, 64, 18176, false, true}}) {
    const BranchShape s{m.hidden, (m.heads + 2 * m.kv_heads) * m.head_dim, m.heads * m.head_dim, m.ffn, 2, m.gated,
                        m.parallel};
    const std::size_t tokens = 8192;
    // The plan's per-token estimate beyond the residual and the norm's output:
    // max(QKV + attention output, the MLP's matrices' columns) (ffn_matrices: 3 gated, 2 GELU).
    const std::size_t attention = s.qkv_width + s.q_width, mlp = (m.gated ? 3 : 2) * m.ffn;
    const std::size_t plan = tokens * std::max(attention, mlp) * 2;
    const BranchLayout l = branch_layout(s, tokens, 0);
    BOOST_TEST(l.bytes >= tokens * std::max(attention, m.gated ? mlp : m.ffn + m.hidden) * 2, m.name);
    BOOST_TEST(l.bytes <= plan + 4 * 256, m.name << ": " << l.bytes << " bytes against the plan's " << plan);
  }
}
