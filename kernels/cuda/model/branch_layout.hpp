#pragma once
// Where a layer's intermediates lie in the cuda forward's one branch region
// (kernels/cuda/model/cuda_transformer.cpp). The attention branch's (QKV, the contiguous
// queries, the attention output, the decode attention workspace, the output projection) and then
// the MLP's (gate and up, the activation, the down projection) take turns in it, as the memory
// plan's activation estimate assumes (sim/model/memory_model.cpp: one layer's intermediates, one
// branch at a time; both for parallel branches, which this region holds in less). Plain C++, no CUDA: the CPU test suite checks that no two intermediates
// live at once overlap (tests/kernels/cuda/model/branch_layout_test.cpp).
//
// What lives at once, in the forward's order (each group is one step of it):
//   QKV GEMM, rope_and_cache:      qkv, q
//   attention:                     q, attn, workspace
//   output GEMM, all-reduce, norm: attn, proj (sequential models: the norm after it adds proj to
//                                  the residual stream; parallel ones keep proj outside, as the
//                                  MLP's output is added to it)
//   MLP up GEMM, activation:       up, act (gated MLPs; GELU runs on act in place)
//   MLP down GEMM:                 act, mlp_out
//   until the next layer's norm:   mlp_out (and, parallel, proj outside)

#include <algorithm>
#include <cstddef>

namespace actorlm::kernels::cuda {

struct BranchShape {
  std::size_t hidden = 0;       // elements of a residual row (the whole hidden size)
  std::size_t qkv_width = 0;    // this rank's (q_heads + 2 kv_heads) * head_dim
  std::size_t q_width = 0;      // this rank's q_heads * head_dim
  std::size_t ffn_columns = 0;  // this rank's FFN columns
  std::size_t elem_bytes = 2;   // the activations' dtype
  bool gated = true;            // gate and up columns (SwiGLU); false: GELU on one matrix
  bool parallel = false;        // attention and MLP side by side: proj outside the region
};

constexpr std::size_t npos_offset = static_cast<std::size_t>(-1);

// Byte offsets into the region for a step of `tokens` rows, and the region's extent.
struct BranchLayout {
  std::size_t qkv = 0, q = 0, attn = 0, workspace = 0;
  std::size_t proj = npos_offset;  // npos_offset: outside the region (parallel models)
  std::size_t up = npos_offset;    // npos_offset: none (GELU)
  std::size_t act = 0, mlp_out = 0;
  std::size_t bytes = 0;
};

// Each intermediate starts on a 256-byte boundary (what cuBLAS and the vector loads like).
constexpr std::size_t branch_align(std::size_t n) { return (n + 255) / 256 * 256; }

inline BranchLayout branch_layout(const BranchShape& s, std::size_t tokens, std::size_t workspace_bytes) {
  const auto size = [&](std::size_t width) { return branch_align(tokens * width * s.elem_bytes); };
  BranchLayout l;
  // Attention: the output over QKV's first columns (dead once rope_and_cache has read them), the
  // queries and the workspace after QKV; the projection after the output (over the queries).
  l.qkv = 0;
  l.attn = 0;
  l.q = size(s.qkv_width);
  l.workspace = l.q + size(s.q_width);
  std::size_t end = l.workspace + branch_align(workspace_bytes);
  if (!s.parallel) {
    l.proj = size(s.q_width);
    end = std::max(end, l.proj + size(s.hidden));
  }
  // MLP: gate and up, then the activation; the down projection over gate and up (dead once the
  // activation is made) when it fits there, else after the activation.
  if (s.gated) {
    l.up = 0;
    l.act = size(2 * s.ffn_columns);
  } else {
    l.act = 0;
  }
  const std::size_t act_end = l.act + size(s.ffn_columns);
  l.mlp_out = s.gated && size(s.hidden) <= l.act ? 0 : act_end;
  end = std::max({end, act_end, l.mlp_out + size(s.hidden)});
  l.bytes = end;
  return l;
}

}  // namespace actorlm::kernels::cuda
