#include "kernels/cpu/model/half.hpp"

#include "model/format/dequantize.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <bit>
#include <cmath>

namespace actorlm::kernels::cpu {

std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | static_cast<std::uint16_t>((a >> 13) & 0x3ffu);  // NaN, quieted
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // inf, or at least 65520: rounds past 65504
  const std::uint32_t e = a >> 23;
  if (e >= 113) {  // a normal half: exponent 2^-14 and up
    std::uint32_t h = ((e - 112) << 10) | ((a >> 13) & 0x3ffu);
    const std::uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
    return sign | static_cast<std::uint16_t>(h);
  }
  // A subnormal half (units of 2^-24) or zero: the 24-bit significand m is worth m * 2^(e-150),
  // that is m >> (126 - e) units, rounded to nearest even. (f32 subnormals, e = 0, round to 0.)
  const std::uint32_t shift = 126 - e;
  if (e == 0 || shift > 24) return sign;
  const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
  std::uint32_t h = m >> shift;
  const std::uint32_t rest = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
  return sign | static_cast<std::uint16_t>(h);
}

float half_to_float(std::uint16_t h) {
  // F16C quiets a signalling NaN; model::f16_to_f32 keeps the payload as it is.
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) h |= 0x200u;
  return model::f16_to_f32(h);
}

namespace {

void to_half_scalar(const float* x, std::uint16_t* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = float_to_half(x[i]);
}

void to_float_scalar(const std::uint16_t* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = half_to_float(x[i]);
}

// The scalar loops over f16 rows (widened exactly) or float rows, one template for both.
float value(std::uint16_t h) { return half_to_float(h); }
float value(float f) { return f; }

template <class E>
float dot_scalar(const float* a, const E* b, std::int32_t n) {
  float acc[8] = {};
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * value(b[i + j]);
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * value(b[i]);
  return sum;
}

template <class E>
void axpy_scalar(float a, const E* x, float* y, std::int32_t n) {
  for (std::int32_t i = 0; i < n; ++i) y[i] += a * value(x[i]);
}

template <class E>
void scores_scalar(const float* q, const E* k, std::int32_t rows, std::int32_t n, float scale, float* out) {
  for (std::int32_t r = 0; r < rows; ++r) out[r] = scale * dot_scalar(q, k + std::size_t(r) * n, n);
}

template <class E>
void accumulate_scalar(const float* w, float inv, const E* v, std::int32_t rows, std::int32_t n, float* y) {
  for (std::int32_t r = 0; r < rows; ++r) axpy_scalar(w[r] * inv, v + std::size_t(r) * n, y, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define ACTORLM_F16C __attribute__((target("avx2,fma,f16c")))

ACTORLM_F16C __m256 load8(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
ACTORLM_F16C __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
ACTORLM_F16C float widen(std::uint16_t h) { return _cvtsh_ss(h); }
ACTORLM_F16C float widen(float f) { return f; }

ACTORLM_F16C void to_half_f16c(const float* x, std::uint16_t* y, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = static_cast<std::uint16_t>(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

ACTORLM_F16C void to_float_f16c(const std::uint16_t* x, float* y, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load8(x + i));
  for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}

template <class E>
ACTORLM_F16C float dot_f16c(const float* a, const E* b, std::int32_t n) {
  __m256 acc = _mm256_setzero_ps();
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i) sum = std::fma(a[i], widen(b[i]), sum);
  return sum;
}

template <class E>
ACTORLM_F16C void axpy_f16c(float a, const E* x, float* y, std::int32_t n) {
  const __m256 av = _mm256_set1_ps(a);
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, load8(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(a, widen(x[i]), y[i]);
}

// One call per KV block instead of one per position. For the usual head sizes (64, 128) the
// query row and the output row stay in registers over the block's rows, and eight rows' dot
// products are summed across their lanes together (three rounds of horizontal adds that pair
// the lanes as dot_f16c does), so the bits are those of the row-by-row loops. (Tried and
// dropped, slower here: the query heads of one KV head together so that each row is widened
// once; paged_attention.cpp widens a block once into floats for a group of heads instead.) The
// same templates serve float rows.
template <int N, class E>
ACTORLM_F16C void scores_fixed(const float* q, const E* k, std::int32_t rows, float scale, float* out) {
  constexpr int V = N / 8;
  __m256 qv[V];
#pragma GCC unroll 16
  for (int i = 0; i < V; ++i) qv[i] = _mm256_loadu_ps(q + 8 * i);
  std::int32_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      acc[j] = _mm256_setzero_ps();
#pragma GCC unroll 16
      for (int i = 0; i < V; ++i) acc[j] = _mm256_fmadd_ps(qv[i], load8(k + std::size_t(r + j) * N + 8 * i), acc[j]);
    }
    // hadd pairs lanes (0,1), (2,3) within each half; the second round pairs those; adding the
    // halves gives ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) for each of the 8 rows.
    const __m256 s01 = _mm256_hadd_ps(acc[0], acc[1]), s23 = _mm256_hadd_ps(acc[2], acc[3]);
    const __m256 s45 = _mm256_hadd_ps(acc[4], acc[5]), s67 = _mm256_hadd_ps(acc[6], acc[7]);
    const __m256 s0123 = _mm256_hadd_ps(s01, s23), s4567 = _mm256_hadd_ps(s45, s67);
    const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
    _mm256_storeu_ps(out + r, _mm256_mul_ps(_mm256_set1_ps(scale), sums));
  }
  for (; r < rows; ++r) out[r] = scale * dot_f16c(q, k + std::size_t(r) * N, N);
}

template <int N, class E>
ACTORLM_F16C void accumulate_fixed(const float* w, float inv, const E* v, std::int32_t rows, float* y) {
  constexpr int V = N / 8;
  // (Unrolled by pragma: left as loops, GCC -O2 keeps the arrays on the stack and every row
  // goes through a store and a reload; 1.9x slower on a 620-position decode.)
  __m256 yv[V];
#pragma GCC unroll 16
  for (int i = 0; i < V; ++i) yv[i] = _mm256_loadu_ps(y + 8 * i);
  for (std::int32_t r = 0; r < rows; ++r) {
    const __m256 a = _mm256_set1_ps(w[r] * inv);
#pragma GCC unroll 16
    for (int i = 0; i < V; ++i) yv[i] = _mm256_fmadd_ps(a, load8(v + std::size_t(r) * N + 8 * i), yv[i]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < V; ++i) _mm256_storeu_ps(y + 8 * i, yv[i]);
}

template <class E>
ACTORLM_F16C void scores_f16c(const float* q, const E* k, std::int32_t rows, std::int32_t n, float scale,
                              float* out) {
  if (n == 64) return scores_fixed<64>(q, k, rows, scale, out);
  if (n == 128) return scores_fixed<128>(q, k, rows, scale, out);
  for (std::int32_t r = 0; r < rows; ++r) out[r] = scale * dot_f16c(q, k + std::size_t(r) * n, n);
}

template <class E>
ACTORLM_F16C void accumulate_f16c(const float* w, float inv, const E* v, std::int32_t rows, std::int32_t n,
                                  float* y) {
  if (n == 64) return accumulate_fixed<64>(w, inv, v, rows, y);
  if (n == 128) return accumulate_fixed<128>(w, inv, v, rows, y);
  for (std::int32_t r = 0; r < rows; ++r) axpy_f16c(w[r] * inv, v + std::size_t(r) * n, y, n);
}

bool cpu_has_f16c() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
#endif

}  // namespace

const HalfKernels& scalar_half_kernels() {
  static const HalfKernels k{"scalar",
                             to_half_scalar,
                             to_float_scalar,
                             dot_scalar<std::uint16_t>,
                             axpy_scalar<std::uint16_t>,
                             scores_scalar<std::uint16_t>,
                             accumulate_scalar<std::uint16_t>,
                             scores_scalar<float>,
                             accumulate_scalar<float>};
  return k;
}

const HalfKernels* f16c_half_kernels() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const HalfKernels k{"f16c",
                             to_half_f16c,
                             to_float_f16c,
                             dot_f16c<std::uint16_t>,
                             axpy_f16c<std::uint16_t>,
                             scores_f16c<std::uint16_t>,
                             accumulate_f16c<std::uint16_t>,
                             scores_f16c<float>,
                             accumulate_f16c<float>};
  static const HalfKernels* p = cpu_has_f16c() ? &k : nullptr;
  return p;
#else
  return nullptr;
#endif
}

const HalfKernels& best_half_kernels() {
  static const HalfKernels& k = f16c_half_kernels() ? *f16c_half_kernels() : scalar_half_kernels();
  return k;
}

}  // namespace actorlm::kernels::cpu
