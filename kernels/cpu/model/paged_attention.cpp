#include "kernels/cpu/model/paged_attention.hpp"

#include "kernels/cpu/model/half.hpp"
#include "kernels/cpu/model/vector_exp.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace actorlm::kernels::cpu {

namespace {

void check_covered(const KvPlaneView& plane, std::span<const std::uint32_t> table, std::uint32_t end) {
  if (end == 0) return;
  const std::size_t blocks = (end - 1) / plane.block_size + 1;
  if (blocks > table.size())
    throw std::out_of_range("paged attention: block table of " + std::to_string(table.size()) +
                            " blocks does not cover position " + std::to_string(end - 1));
  for (std::size_t i = 0; i < blocks; ++i)
    if (table[i] >= plane.num_blocks)
      throw std::out_of_range("paged attention: block " + std::to_string(table[i]) +
                              " outside a cache of " + std::to_string(plane.num_blocks));
}

}  // namespace

const char* to_string(KvDtype d) { return d == KvDtype::f16 ? "f16" : "f32"; }

void write_kv(const KvPlaneView& kp, const KvPlaneView& vp, std::span<const std::uint32_t> table,
              std::uint32_t first, std::uint32_t n, const float* k, const float* v,
              std::int64_t row_stride) {
  check_covered(kp, table, first + n);
  const auto hd = static_cast<std::size_t>(kp.head_dim);
  const auto to_half = best_half_kernels().to_half;
  for (std::uint32_t t = 0; t < n; ++t)
    for (std::int32_t h = 0; h < kp.kv_heads; ++h) {
      const float* ks = k + t * row_stride + std::int64_t(h) * kp.head_dim;
      const float* vs = v + t * row_stride + std::int64_t(h) * kp.head_dim;
      if (kp.dtype == KvDtype::f16) {
        to_half(ks, kp.at<std::uint16_t>(table, first + t, h), hd);
        to_half(vs, vp.at<std::uint16_t>(table, first + t, h), hd);
      } else {
        std::memcpy(kp.at<float>(table, first + t, h), ks, hd * sizeof(float));
        std::memcpy(vp.at<float>(table, first + t, h), vs, hd * sizeof(float));
      }
    }
}

namespace {

// Dot product and y += a * x over head_dim floats, in a fixed order that depends only on the
// two rows: eight lanes of partial sums, then pairs. An AVX2 + FMA version (the same order, fused
// multiply-adds) where the CPU has it, chosen once.
float dot_portable(const float* a, const float* b, std::int32_t n) {
  float acc[8] = {};
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void axpy_portable(float a, const float* x, float* y, std::int32_t n) {
  for (std::int32_t i = 0; i < n; ++i) y[i] += a * x[i];
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, std::int32_t n) {
  __m256 acc = _mm256_setzero_ps();
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

__attribute__((target("avx2,fma"))) void axpy_avx2(float a, const float* x, float* y, std::int32_t n) {
  const __m256 av = _mm256_set1_ps(a);
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

__attribute__((target("avx2,fma"))) void scores_avx2(const float* q, const float* k, std::int32_t rows, std::int32_t n,
                                                    float scale, float* out) {
  for (std::int32_t r = 0; r < rows; ++r) out[r] = scale * dot_avx2(q, k + std::size_t(r) * n, n);
}

__attribute__((target("avx2,fma"))) void accumulate_avx2(const float* w, float inv, const float* v, std::int32_t rows,
                                                        std::int32_t n, float* y) {
  for (std::int32_t r = 0; r < rows; ++r) axpy_avx2(w[r] * inv, v + std::size_t(r) * n, y, n);
}
#endif

// A block's rows in one call (one indirect call per block, not per position).
void scores_portable(const float* q, const float* k, std::int32_t rows, std::int32_t n, float scale, float* out) {
  for (std::int32_t r = 0; r < rows; ++r) out[r] = scale * dot_portable(q, k + std::size_t(r) * n, n);
}

void accumulate_portable(const float* w, float inv, const float* v, std::int32_t rows, std::int32_t n, float* y) {
  for (std::int32_t r = 0; r < rows; ++r) axpy_portable(w[r] * inv, v + std::size_t(r) * n, y, n);
}

// The softmax's numerators in place, s[i] = exp(s[i] - max(s)), and their sum.
float exp_shifted_portable(float* s, std::uint32_t n) {
  const float mx = *std::max_element(s, s + n);
  float sum = 0;
  for (std::uint32_t i = 0; i < n; ++i) sum += (s[i] = std::exp(s[i] - mx));
  return sum;
}

#ifdef ACTORLM_VECTOR_EXP  // x86-64 with glibc (vector_exp.hpp)
// Eight lanes of exp per call (vector_exp.hpp) instead of one scalar call per position, which
// took a third of a decode step's attention over 1,024 positions.
__attribute__((target("avx2,fma"))) float exp_shifted_avx2(float* s, std::uint32_t n) {
  std::uint32_t i = 0;
  __m256 m8 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (; i + 8 <= n; i += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(s + i));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m8);
  float mx = *std::max_element(lanes, lanes + 8);
  for (; i < n; ++i) mx = std::max(mx, s[i]);
  const __m256 shift = _mm256_set1_ps(mx);
  __m256 acc = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(s + i), shift));
    _mm256_storeu_ps(s + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  _mm256_store_ps(lanes, acc);
  float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i) sum += (s[i] = std::exp(s[i] - mx));
  return sum;
}

const auto exp_shifted = cpu_has_avx2_fma() ? exp_shifted_avx2 : exp_shifted_portable;
#else
const auto exp_shifted = exp_shifted_portable;
#endif

#if defined(__x86_64__) && defined(__GNUC__)
const auto scores_rows = cpu_has_avx2_fma() ? scores_avx2 : scores_portable;
const auto accumulate_rows = cpu_has_avx2_fma() ? accumulate_avx2 : accumulate_portable;
#else
const auto scores_rows = scores_portable;
const auto accumulate_rows = accumulate_portable;
#endif

}  // namespace

namespace {

// The f32 and f16 planes' inner loops over the positions of one block: the same order of
// operations, f16 widened in registers.
struct FloatRows {
  using Element = float;
  void scores(const float* q, const float* k, std::int32_t rows, std::int32_t n, float scale, float* out) const {
    scores_rows(q, k, rows, n, scale, out);
  }
  void accumulate(const float* w, float inv, const float* v, std::int32_t rows, std::int32_t n, float* y) const {
    accumulate_rows(w, inv, v, rows, n, y);
  }
};
struct HalfRows {
  using Element = std::uint16_t;
  const HalfKernels& k = best_half_kernels();
  void scores(const float* q, const std::uint16_t* x, std::int32_t rows, std::int32_t n, float scale, float* out) const {
    k.scores(q, x, rows, n, scale, out);
  }
  void accumulate(const float* w, float inv, const std::uint16_t* v, std::int32_t rows, std::int32_t n, float* y) const {
    k.accumulate(w, inv, v, rows, n, y);
  }
};

template <class Rows>
void attend(const KvPlaneView& kp, const KvPlaneView& vp, std::span<const std::uint32_t> table,
            std::uint32_t first, std::uint32_t n, const float* q, std::int64_t row_stride,
            std::int32_t q_heads, float scale, float* out, ThreadPool* pool) {
  using E = typename Rows::Element;
  const Rows r;
  const std::int32_t hd = kp.head_dim;
  const std::int64_t out_stride = std::int64_t(q_heads) * hd;
  const std::uint32_t bs = kp.block_size;
  const E* k_data = reinterpret_cast<const E*>(kp.data);
  const E* v_data = reinterpret_cast<const E*>(vp.data);
  // One (query head, query row) at a time: its scores over the visible positions, softmax, and
  // the weighted sum of values, read in place from the cache's blocks, a block's positions of
  // the head (consecutive rows) per call.
  const auto rows = [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> scores;
    for (std::int64_t item = begin; item < end; ++item) {
      const auto j = static_cast<std::int32_t>(item / n);
      const auto t = static_cast<std::uint32_t>(item % n);
      const std::int32_t kvh = j * kp.kv_heads / q_heads;
      const float* qv = q + std::int64_t(t) * row_stride + std::int64_t(j) * hd;
      const std::uint32_t visible = first + t + 1;  // causal: positions [0, first + t]
      scores.resize(visible);
      // Offset of (block b of the table, head kvh, slot 0) in either plane.
      const auto head_rows = [&](std::uint32_t c0) {
        return std::size_t(table[c0 / bs]) * kp.block_elements() + std::size_t(kvh) * bs * std::size_t(hd);
      };
      for (std::uint32_t c0 = 0; c0 < visible; c0 += bs)
        r.scores(qv, k_data + head_rows(c0), static_cast<std::int32_t>(std::min(bs, visible - c0)), hd, scale,
                 scores.data() + c0);
      const float inv = 1.0f / exp_shifted(scores.data(), visible);
      float* o = out + std::int64_t(t) * out_stride + std::int64_t(j) * hd;
      std::fill(o, o + hd, 0.0f);
      for (std::uint32_t c0 = 0; c0 < visible; c0 += bs)
        r.accumulate(scores.data() + c0, inv, v_data + head_rows(c0), static_cast<std::int32_t>(std::min(bs, visible - c0)),
                     hd, o);
    }
  };
  const std::int64_t items = std::int64_t(q_heads) * n;
  if (pool != nullptr) pool->parallel_for(items, 1, rows);
  else rows(0, items);
}

}  // namespace

void paged_attention(const KvPlaneView& kp, const KvPlaneView& vp, std::span<const std::uint32_t> table,
                     std::uint32_t first, std::uint32_t n, const float* q, std::int64_t row_stride,
                     std::int32_t q_heads, float scale, float* out, ThreadPool* pool) {
  if (n == 0) return;
  check_covered(kp, table, first + n);
  if (kp.dtype != vp.dtype) throw std::invalid_argument("paged attention: K and V planes of different dtypes");
  switch (kp.dtype) {  // the one dispatch from the cache's dtype to the inner loops
    case KvDtype::f32: return attend<FloatRows>(kp, vp, table, first, n, q, row_stride, q_heads, scale, out, pool);
    case KvDtype::f16: return attend<HalfRows>(kp, vp, table, first, n, q, row_stride, q_heads, scale, out, pool);
  }
  throw std::invalid_argument("paged attention: unknown KV dtype");
}

}  // namespace actorlm::kernels::cpu
