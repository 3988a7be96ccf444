#include "kernels/cpu/model/ops.hpp"

#include "kernels/cpu/model/vector_exp.hpp"

#include <cblas.h>

#include <cmath>
#include <vector>

namespace actorlm::kernels::cpu {

void matmul_nt(const float* x, std::int64_t m, std::int64_t k, const float* w, std::int64_t n, float* y) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, x, static_cast<blasint>(k), w,
              static_cast<blasint>(k), 0.0f, y, static_cast<blasint>(n));
}

void rms_norm(const float* x, std::int64_t m, std::int64_t n, const float* weight, float eps, float* out) {
  for (std::int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    double ss = 0;
    for (std::int64_t i = 0; i < n; ++i) ss += double(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / double(n)) + eps);
    for (std::int64_t i = 0; i < n; ++i) o[i] = xr[i] * inv * weight[i];
  }
}

void layer_norm(const float* x, std::int64_t m, std::int64_t n, const float* weight,
                const float* bias, float eps, float* out) {
  for (std::int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += xr[i];
    const double mean = sum / double(n);
    double var = 0;
    for (std::int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const float inv = 1.0f / std::sqrt(static_cast<float>(var / double(n)) + eps);
    const float mu = static_cast<float>(mean);
    for (std::int64_t i = 0; i < n; ++i) o[i] = (xr[i] - mu) * inv * weight[i] + bias[i];
  }
}

void apply_rope(float* x, std::int64_t rows, std::int64_t row_stride, std::int32_t heads,
                std::span<const std::int32_t> positions, const RopeParams& p) {
  const std::int32_t half = p.head_dim / 2;
  // inv_freq[i] = theta^(-2i / head_dim), as HF computes it (in float from a double power).
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  for (std::int32_t i = 0; i < half; ++i)
    inv_freq[i] = static_cast<float>(1.0 / std::pow(double(p.theta), 2.0 * i / p.head_dim));
  std::vector<float> cos_v(static_cast<std::size_t>(half)), sin_v(static_cast<std::size_t>(half));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float pos = static_cast<float>(positions[static_cast<std::size_t>(r)]) / p.linear_factor;
    for (std::int32_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      cos_v[i] = std::cos(angle);
      sin_v[i] = std::sin(angle);
    }
    for (std::int32_t h = 0; h < heads; ++h) {
      float* v = x + r * row_stride + std::int64_t(h) * p.head_dim;
      for (std::int32_t i = 0; i < half; ++i) {
        float* a = p.style == RopeStyle::halves ? v + i : v + 2 * i;
        float* b = p.style == RopeStyle::halves ? v + i + half : v + 2 * i + 1;
        const float x0 = *a, x1 = *b;
        *a = x0 * cos_v[i] - x1 * sin_v[i];
        *b = x1 * cos_v[i] + x0 * sin_v[i];
      }
    }
  }
}

namespace {

void silu_mul_row(const float* g, const float* u, std::int64_t f, float* o) {
  for (std::int64_t i = 0; i < f; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

#ifdef ACTORLM_VECTOR_EXP
// The same formula, eight elements at a time (exp within an ulp of std::exp's).
__attribute__((target("avx2,fma"))) void silu_mul_row_avx2(const float* g, const float* u, std::int64_t f, float* o) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  std::int64_t i = 0;
  for (; i + 8 <= f; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 e = _ZGVdN8v_expf(_mm256_xor_ps(gv, sign));
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
  }
  silu_mul_row(g + i, u + i, f - i, o + i);
}
const auto silu_mul_rows = cpu_has_avx2_fma() ? silu_mul_row_avx2 : silu_mul_row;
#else
const auto silu_mul_rows = silu_mul_row;
#endif

}  // namespace

void silu_mul(const float* gate_up, std::int64_t m, std::int64_t f, float* out) {
  for (std::int64_t r = 0; r < m; ++r) {
    const float* g = gate_up + r * 2 * f;
    silu_mul_rows(g, g + f, f, out + r * f);
  }
}

void gelu(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

void add_in_place(float* y, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace actorlm::kernels::cpu
