#pragma once
// Element-wise and GEMM building blocks of the cpu model forward. Matrices are row-major float.
// GEMMs go to the BLAS library (OpenBLAS); the rest are plain loops.

#include "model/arch/architecture.hpp"

#include <cstdint>
#include <span>

namespace actorlm::kernels::cpu {

using model::RopeStyle;

// y[m, n] = x[m, k] . w[n, k]^T   (w is a PyTorch-style [out_features, in_features] weight)
void matmul_nt(const float* x, std::int64_t m, std::int64_t k, const float* w, std::int64_t n, float* y);

// out[m, n] = x * rsqrt(mean(x^2) + eps) * weight, per row. out may alias x.
void rms_norm(const float* x, std::int64_t m, std::int64_t n, const float* weight, float eps, float* out);

// out[m, n] = (x - mean) * rsqrt(var + eps) * weight + bias, per row. out may alias x.
void layer_norm(const float* x, std::int64_t m, std::int64_t n, const float* weight,
                const float* bias, float eps, float* out);

struct RopeParams {
  std::int32_t head_dim = 0;
  float theta = 10000.0f;
  float linear_factor = 1.0f;
  RopeStyle style = RopeStyle::halves;
};

// Rotates `heads` heads of each row in place: x is [rows, row_stride] with the heads at
// [heads, head_dim] from the start of each row; row r is at position positions[r].
void apply_rope(float* x, std::int64_t rows, std::int64_t row_stride, std::int32_t heads,
                std::span<const std::int32_t> positions, const RopeParams& p);

// gate_up: [m, 2 f] (gate columns then up columns) -> out: [m, f] = silu(gate) * up
void silu_mul(const float* gate_up, std::int64_t m, std::int64_t f, float* out);

// In place, exact (erf) GELU as torch.nn.GELU().
void gelu(float* x, std::int64_t n);

// y += x
void add_in_place(float* y, const float* x, std::int64_t n);

}  // namespace actorlm::kernels::cpu
