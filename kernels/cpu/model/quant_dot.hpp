#pragma once
// Matrix kernels over weights kept in their stored type (weight_matrix.hpp), for y = x . w^T
// with few or many activation rows: each weight block is read once per step and used for every
// activation row while it is in registers (rows of the tile), then panels of weight rows are
// reused from L1 across groups of activation rows.
//
// Integer weight types (Q8_0, Q4_0, Q4_1) take activations quantized per 32-value block to 16
// bits (Q16Block: x ~= q * d, symmetric, round half to even) and use integer dot products
// (AVX2 _mm256_madd_epi16) with fp32 accumulation:
//   Q8_0: sum_b dw_b * dx_b * sum_j w_j q_j
//   Q4_0: sum_b dw_b * dx_b * sum_j (w_j - 8) q_j
//   Q4_1: sum_b dw_b * dx_b * sum_j w_j q_j + mw_b * s_b       (s_b = dx_b * sum_j q_j)
// Why 16 bits and not llama.cpp's 8 (maddubs): on the default model (SmolLM2-135M Q4_1, 30
// layers) 8-bit activations moved the logits by up to 0.95 from transformers' and flipped its
// greedy answer, whose first step has a top-2 margin of 0.08; 16 bits leave float-like error
// (max activation / 65534 per value) at the same weight traffic, the cost being a widening of
// the weight codes to 16 bits in registers.
// F16 and BF16 weights are widened in registers and multiplied by float activations.
//
// Reproducibility: an output element's arithmetic depends only on its weight row and its
// activation row (never on m, the tile or the thread), so a sequence's logits are the same bits
// alone or in any batch, in one chunk or many. Scalar and AVX2 paths differ in the order of the
// float additions only (tests/kernels/cpu/model/quant_dot_test.cpp bounds the difference).

#include "kernels/cpu/model/weight_matrix.hpp"

#include <cstdint>

namespace actorlm::kernels::cpu {

constexpr std::int64_t act_block = 32;  // values per activation block = per weight block

struct Q16Block {
  float d = 0;               // scale: max |x| / 32767
  float s = 0;               // d * sum(q), for Q4_1's minimum term
  std::int16_t q[act_block]; // round(x / d)
};

struct DotParams {
  const WeightMatrix* w = nullptr;         // [n, k]
  std::int64_t row_begin = 0, row_end = 0; // the weight rows (output columns) to compute
  const float* x = nullptr;                // [m, k]: F16 / BF16 kernels
  const Q16Block* xq = nullptr;             // [m, k / 32]: integer kernels
  std::int64_t m = 0;
  float* y = nullptr;                      // [m, ldy]: y[i * ldy + r] for r in [row_begin, row_end)
  std::int64_t ldy = 0;
};

using DotKernel = void (*)(const DotParams&);
using QuantizeKernel = void (*)(const float* x, std::int64_t k, Q16Block* out);  // k % 32 == 0
// out[k] = the stored row `row` of type t as float, exactly as model::dequantize gives it.
using DequantizeKernel = void (*)(model::DType t, const std::byte* row, std::int64_t k, float* out);

struct DotKernels {
  const char* name = "";
  QuantizeKernel quantize = nullptr;
  DequantizeKernel dequantize = nullptr;
  DotKernel q8_0 = nullptr, q4_0 = nullptr, q4_1 = nullptr, f16 = nullptr, bf16 = nullptr;
  // The kernel for `t` (nullptr for F32: that goes to BLAS).
  DotKernel for_type(model::DType t) const;
};

const DotKernels& scalar_kernels();
// nullptr when this build or this CPU has no AVX2 + FMA + F16C.
const DotKernels* avx2_kernels();
// The fastest the CPU supports, chosen once (__builtin_cpu_supports).
const DotKernels& best_kernels();

bool is_integer_type(model::DType t);

}  // namespace actorlm::kernels::cpu
