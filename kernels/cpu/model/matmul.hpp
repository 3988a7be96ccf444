#pragma once
// y[m, n] = x[m, k] . w[n, k]^T for a weight in any stored type, its output rows split over the
// pool's threads (each weight byte read once per call):
// - F32 weights: OpenBLAS sgemm on each thread's panel of rows (one call over the whole matrix
//   when the pool has one thread, OpenBLAS then threading it as configured);
// - Q8_0 / Q4_0 / Q4_1: activations quantized to Q8 blocks once, then quant_dot.hpp's integer
//   kernels; F16 / BF16: quant_dot.hpp's widening kernels. Kernels chosen by CPU features.

#include "kernels/cpu/model/quant_dot.hpp"
#include "kernels/cpu/thread_pool.hpp"

#include <vector>

namespace actorlm::kernels::cpu {

struct MatmulParams {
  const float* x = nullptr;          // [m, k]
  std::int64_t m = 0;
  const WeightMatrix* w = nullptr;   // [n, k]
  float* y = nullptr;                // [m, n]
};

// `xq` is scratch for the quantized activations (resized as needed).
void matmul(const MatmulParams& p, ThreadPool& pool, std::vector<Q16Block>& xq);

}  // namespace actorlm::kernels::cpu
