#pragma once
// Matrix kernels over weights kept in their stored type (weight_matrix.hpp), for y = x . w^T
// with any number of activation rows.
//
// Integer weight types (Q8_0, Q4_0, Q4_1), grouped 16 rows at a time (row_groups.hpp), take
// activations quantized per 32-value block to 16 bits (Q16Block: x ~= q * d, symmetric, round
// half to even) and use integer dot products with fp32 accumulation. For weight row r, activation
// row i and block b, with integer block sum S = sum_j w_j q_j (exact in int32):
//   acc = fma(float(S), dw_b * dx_b, acc)      then, Q4_1 only,   acc = fma(mw_b, s_b, acc)
// (Q4_0's codes are w_j - 8; s_b = dx_b * sum_j q_j), blocks in order, acc starting at 0. The
// 16 rows of a group are the 16 lanes of a register: a code unit widened to 16 bits meets one
// broadcast pair of activations (AVX-512 VNNI vpdpwssd, AVX2 vpmaddwd), and a tile of activation
// rows reuses each weight block while it is in registers. Every path (scalar, AVX2, AVX-512)
// computes exactly this, so they give the same bits.
// Why 16 bits and not llama.cpp's 8 (maddubs): on the default model (SmolLM2-135M Q4_1, 30
// layers) 8-bit activations moved the logits by up to 0.95 from transformers' and flipped its
// greedy answer, whose first step has a top-2 margin of 0.08; 16 bits leave float-like error
// (max activation / 65534 per value) at the same weight traffic.
// F16 and BF16 weights (row layout) are widened in registers and multiplied by float
// activations.
//
// Reproducibility: an output element's arithmetic depends only on its weight row and its
// activation row (never on m, the tile or the thread), so a sequence's logits are the same bits
// alone or in any batch, in one chunk or many. For F16 / BF16 the scalar and AVX2 paths differ in
// the order of the float additions (tests/kernels/cpu/model/quant_dot_test.cpp bounds it).

#include "kernels/cpu/model/row_groups.hpp"
#include "kernels/cpu/model/weight_matrix.hpp"

#include <cstddef>
#include <cstdint>

namespace actorlm::kernels::cpu {

constexpr std::int64_t act_block = 32;  // values per activation block = per weight block
// Activation rows are quantized in tiles of 8: block b of row 8t + i is xq[(t * nb + b) * 8 + i]
// (nb = k / 32), so a kernel reads a tile's blocks at fixed offsets from one pointer.
constexpr std::int64_t act_tile = 8;

struct Q16Block {
  float d = 0;               // scale: max |x| / 32767
  float s = 0;               // d * sum(q), for Q4_1's minimum term
  std::int16_t q[act_block]; // round(x / d)
};

struct DotParams {
  const WeightMatrix* w = nullptr;         // [n, k]
  std::int64_t row_begin = 0, row_end = 0; // the weight rows (output columns) to compute; integer
                                           // types: whole groups of 16 (row_end may be w->rows)
  const float* x = nullptr;                // [m, k]: F16 / BF16 kernels
  const Q16Block* xq = nullptr;            // [ceil(m / 8), k / 32, 8]: integer kernels (act_tile)
  std::int64_t m = 0;
  float* y = nullptr;                      // [m, ldy]: y[i * ldy + r] for r in [row_begin, row_end)
  std::int64_t ldy = 0;
};

using DotKernel = void (*)(const DotParams&);
// x[k] (k % 32 == 0) to k / 32 blocks, block b at out[b * stride].
using QuantizeKernel = void (*)(const float* x, std::int64_t k, Q16Block* out, std::int64_t stride);

struct DotKernels {
  const char* name = "";
  QuantizeKernel quantize = nullptr;
  DotKernel q8_0 = nullptr, q4_0 = nullptr, q4_1 = nullptr, f16 = nullptr, bf16 = nullptr;
  // The kernel for `t` (nullptr for F32: that goes to BLAS).
  DotKernel for_type(model::DType t) const;
};

const DotKernels& scalar_kernels();
// nullptr when this build or this CPU has no AVX2 + FMA + F16C.
const DotKernels* avx2_kernels();
// nullptr without AVX-512 F / BW / VL / VNNI (and AVX2); F16 / BF16 and quantization as AVX2's.
const DotKernels* avx512_kernels();
// The fastest the CPU supports, chosen once (__builtin_cpu_supports).
const DotKernels& best_kernels();

bool is_integer_type(model::DType t);

// Blocks a tiled buffer needs for m rows of k values: ceil(m / 8) * 8 * (k / 32).
inline std::size_t tiled_blocks(std::int64_t m, std::int64_t k) {
  return static_cast<std::size_t>((m + act_tile - 1) / act_tile * act_tile * (k / act_block));
}
// Activation rows per pass of an integer kernel over its weight groups: a pass's blocks take
// 256 KiB (in L2 beside the weight group being read). For 2,048 rows of the default model's
// matrices, 2 threads, this took all GEMMs from 890-1,054 to 1,066-1,138 rows/s (two runs each).
inline std::int64_t rows_per_pass(std::int64_t k) {
  const std::int64_t rows = (std::int64_t{1} << 18) / (k / act_block * static_cast<std::int64_t>(sizeof(Q16Block)));
  return rows < act_tile ? act_tile : rows / act_tile * act_tile;
}

// The integer kernels' loop order: activation rows in passes of rows_per_pass, each pass over
// the weight groups of 16 rows covering [row_begin, row_end), each group against the pass's
// rows in tiles of `tile` (a divisor of act_tile) while its blocks are in L1:
// fn(group, first activation row, rows in the tile), the tile's blocks at
// xq + (i0 / act_tile) * nb * act_tile + i0 % act_tile.
template <class Fn>
void for_each_group_tile(const DotParams& p, std::int64_t tile, Fn&& fn) {
  const std::int64_t pass = rows_per_pass(p.w->cols);
  for (std::int64_t m0 = 0; m0 < p.m; m0 += pass) {
    const std::int64_t m1 = p.m < m0 + pass ? p.m : m0 + pass;
    for (std::int64_t g = p.row_begin / row_group; g * row_group < p.row_end; ++g)
      for (std::int64_t i0 = m0; i0 < m1; i0 += tile) fn(g, i0, m1 - i0 < tile ? m1 - i0 : tile);
  }
}
// Rows [begin, end) of x[m, k] quantized into their places in xq[tiled_blocks(m, k)].
void quantize_rows(const DotKernels& kernels, const float* x, std::int64_t k, std::int64_t begin,
                   std::int64_t end, Q16Block* xq);

}  // namespace actorlm::kernels::cpu
