#pragma once
// y[m, n] = x[m, k] . w[n, k]^T for a weight in any stored type, its output rows split over the
// pool's threads (each weight byte read once per call):
// - F32 weights: OpenBLAS sgemm on each thread's panel of rows (one call over the whole matrix
//   when the pool has one thread, OpenBLAS then threading it as configured);
// - integer weights (Q8_0, Q4_0, Q4_1, grouped: row_groups.hpp), any number of rows:
//   quant_dot.hpp's kernels on the activations quantized to 16-bit blocks once per call, chosen by
//   CPU features; an output's bits do not depend on m;
// - F16 / BF16 weights, fewer than panel_min_rows activation rows: quant_dot.hpp's kernels;
//   more rows: the matrix dequantized whole on the pool (panels of each thread's rows for
//   matrices over 2^22 weights) and OpenBLAS sgemm on it, each thread taking a share of the
//   activation rows.

#include "kernels/cpu/model/quant_dot.hpp"
#include "kernels/cpu/thread_pool.hpp"

#include <vector>

namespace actorlm::kernels::cpu {

// Where dequantized panels and sgemm overtake the F16 / BF16 kernels. Measured when the integer
// types took this path too, with row-layout kernels like the F16 ones (the grouped integer
// kernels now beat sgemm at every m): all of a step's GEMMs on SmolLM2 Q4_1, tokens/s, kernels
// vs panels, 2 threads. An earlier session's 2 Zen 3 cores: m = 16: 308 vs 248; m = 32: 298 vs
// 339; m = 64: 336 vs 408; m = 512: 260 vs 479 (the threshold was 32).
// 2 Zen 4 vCPUs (AVX-512), medians of 7, side by side: m = 8: 252 vs 57; m = 16: 259 vs 103;
// m = 32: 261 vs 152; m = 48: 286 vs 245; m = 64: 338 vs 280; m = 128: 351 vs 450; through the
// engine (bench cpu, 64 requests, alternating runs) 32 concurrent 110 / 131 -> 182 / 179
// tokens/s and 64 concurrent 146 / 176 -> 170 / 179 with the threshold at 96 instead of 32. The
// crossover moves with the CPU; 96 is for the machines the project runs on now.
constexpr std::int64_t default_panel_min_rows = 96;

struct MatmulParams {
  const float* x = nullptr;          // [m, k]
  std::int64_t m = 0;
  const WeightMatrix* w = nullptr;   // [n, k]
  float* y = nullptr;                // [m, n]
  std::int64_t panel_min_rows = default_panel_min_rows;
};

struct MatmulScratch {
  std::vector<Q16Block> xq;  // [ceil(m / 8), k / 32, 8]: the activations' 16-bit blocks, tiled
  std::vector<float> wf;     // [n, k]: F16 / BF16 weights as floats, for the sgemm path
};

void matmul(const MatmulParams& p, ThreadPool& pool, MatmulScratch& scratch);

}  // namespace actorlm::kernels::cpu
