// quant_dot.hpp's kernels with AVX2 + FMA + F16C (this file alone is compiled with -mavx2 -mfma
// -mf16c; quant_dot_scalar.cpp calls in only when the CPU has them). Integer dot products: weight
// codes widened to int16 in registers, _mm256_madd_epi16 against the 16-bit activations gives 8
// int32 lanes of pair sums; a lane adds 4 products of |w| <= 128 and |q| <= 32768, under 2^24,
// so its conversion to float is exact.
#include "kernels/cpu/model/quant_dot.hpp"

#include "model/format/dequantize.hpp"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace actorlm::kernels::cpu {

namespace {

using model::DType;
using model::load_u16;

float f16(const std::byte* p) { return _cvtsh_ss(load_u16(p)); }

// A fixed order of additions, the same for every output element.
float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 16 bytes of 4-bit codes -> values 0..15 as int16: low nibbles are values 0..15 (lo), high
// ones 16..31 (hi). Bytes widened first, so the high nibbles need no mask: three operations
// instead of five.
void unpack_nibbles(const std::byte* qs, __m256i& lo, __m256i& hi) {
  const __m256i t = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  lo = _mm256_and_si256(t, _mm256_set1_epi16(0x0f));
  hi = _mm256_srli_epi16(t, 4);
}

void quantize(const float* x, std::int64_t k, Q16Block* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (std::int64_t b = 0; b < k / act_block; ++b, x += act_block) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[j]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float d = _mm_cvtss_f32(m) / 32767.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 mul = _mm256_set1_ps(id);
    __m256i i[4];
    for (int j = 0; j < 4; ++j)
      i[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // packs (saturating) interleaves 128-bit lanes; the 64-bit permutation restores the order.
    const __m256i q01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i[0], i[1]), _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i q23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i[2], i[3]), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].q), q01);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].q + 16), q23);
    // The sum of the stored (saturated) codes, as the scalar path adds them.
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i sum32 = _mm256_add_epi32(_mm256_madd_epi16(q01, ones), _mm256_madd_epi16(q23, ones));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum32), _mm256_extracti128_si256(sum32, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    out[b].d = d;
    out[b].s = d * static_cast<float>(_mm_cvtsi128_si32(s));
  }
}

// A decoded weight block: codes 0..15 of values 0..15 (lo) and 16..31 (hi) as int16, scale and
// minimum.
struct Decoded {
  __m256i lo, hi;
  float d, m;
};

template <DType T>
struct Format;
template <>
struct Format<DType::q8_0> {
  static constexpr std::size_t bytes = 34;
  static constexpr bool has_min = false;
  static Decoded load(const std::byte* b) {
    const __m128i* q = reinterpret_cast<const __m128i*>(b + 2);
    return {_mm256_cvtepi8_epi16(_mm_loadu_si128(q)), _mm256_cvtepi8_epi16(_mm_loadu_si128(q + 1)), f16(b), 0};
  }
};
template <>
struct Format<DType::q4_0> {
  static constexpr std::size_t bytes = 18;
  static constexpr bool has_min = false;
  static Decoded load(const std::byte* b) {
    Decoded w{{}, {}, f16(b), 0};
    unpack_nibbles(b + 2, w.lo, w.hi);
    const __m256i eight = _mm256_set1_epi16(8);
    w.lo = _mm256_sub_epi16(w.lo, eight);
    w.hi = _mm256_sub_epi16(w.hi, eight);
    return w;
  }
};
template <>
struct Format<DType::q4_1> {
  static constexpr std::size_t bytes = 20;
  static constexpr bool has_min = true;
  static Decoded load(const std::byte* b) {
    // Scale and minimum, adjacent f16s, converted by one instruction.
    std::uint32_t dm;
    std::memcpy(&dm, b, sizeof dm);
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm)));
    Decoded w{{}, {}, _mm_cvtss_f32(f), _mm_cvtss_f32(_mm_movehdup_ps(f))};
    unpack_nibbles(b + 4, w.lo, w.hi);
    return w;
  }
};

// Output elements (r, i0 .. i0 + MR): weight row r against MR activation rows, one accumulator
// each (MR independent chains of FMAs; an element's own arithmetic is the same in every tile).
template <DType T>
struct IntegerKernel {
  template <int MR>
  static void tile(const DotParams& p, std::int64_t r, std::int64_t i0) {
    using F = Format<T>;
    const std::int64_t nb = p.w->cols / act_block;
    const std::byte* w = p.w->row(r);
    const Q16Block* x[MR];
    for (int i = 0; i < MR; ++i) x[i] = p.xq + (i0 + i) * nb;
    __m256 acc[MR];
    float mins[MR];
    for (int i = 0; i < MR; ++i) {
      acc[i] = _mm256_setzero_ps();
      mins[i] = 0;
    }
    for (std::int64_t b = 0; b < nb; ++b) {
      const Decoded dw = F::load(w + b * F::bytes);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const auto* q = reinterpret_cast<const __m256i*>(x[i][b].q);
        const __m256i sums = _mm256_add_epi32(_mm256_madd_epi16(dw.lo, _mm256_loadu_si256(q)),
                                              _mm256_madd_epi16(dw.hi, _mm256_loadu_si256(q + 1)));
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(dw.d * x[i][b].d), acc[i]);
        if constexpr (F::has_min) mins[i] = std::fma(dw.m, x[i][b].s, mins[i]);
      }
    }
    for (int i = 0; i < MR; ++i) p.y[(i0 + i) * p.ldy + r] = hsum(acc[i]) + mins[i];
  }
};

__m256 widen_f16(const std::byte* w) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
}
__m256 widen_bf16(const std::byte* w) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
float f16_scalar(std::uint16_t h) { return _cvtsh_ss(h); }
float bf16_scalar(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

template <bool BF16>
struct HalfKernel {
  template <int MR>
  static void tile(const DotParams& p, std::int64_t r, std::int64_t i0) {
    const std::int64_t k = p.w->cols, k8 = k / 8 * 8;
    const std::byte* w = p.w->row(r);
    __m256 acc[MR];
    float tail[MR];
    for (int i = 0; i < MR; ++i) {
      acc[i] = _mm256_setzero_ps();
      tail[i] = 0;
    }
    for (std::int64_t j = 0; j < k8; j += 8) {
      const __m256 wv = BF16 ? widen_bf16(w + 2 * j) : widen_f16(w + 2 * j);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc[i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p.x + (i0 + i) * k + j), acc[i]);
    }
    for (std::int64_t j = k8; j < k; ++j) {
      const std::uint16_t h = load_u16(w + 2 * j);
      const float wj = BF16 ? bf16_scalar(h) : f16_scalar(h);
      for (int i = 0; i < MR; ++i) tail[i] = std::fma(wj, p.x[(i0 + i) * k + j], tail[i]);
    }
    for (int i = 0; i < MR; ++i) p.y[(i0 + i) * p.ldy + r] = hsum(acc[i]) + tail[i];
  }
};

// Rows [r0, r1) against activation rows i0 .. i0 + MR.
template <class K, int MR>
void rows(const DotParams& p, std::int64_t r0, std::int64_t r1, std::int64_t i0) {
  for (std::int64_t r = r0; r < r1; ++r) K::template tile<MR>(p, r, i0);
}

// Panels of weight rows small enough to stay in L1 while every group of 4 activation rows
// passes over them: the weights come from memory once per call. A tile is one weight row
// against up to 4 activation rows, so the weights are read as one sequential stream that the
// hardware prefetcher follows. Tiles of 2 or 4 weight rows (with software prefetch) read 2 or 4
// interleaved streams of a few hundred bytes each, which it does not: one thread streamed
// SmolLM2's 1,536 x 576 matrices for one activation row at 7.2 GB/s (Q4_1), 7.1 (Q8_0) and 5.2
// (F16) with 4-row tiles against 11.6, 16.4 and 12.2 with 1-row tiles; at 2 activation rows
// 7.4 / 7.7 / 4.1 against 7.5 / 13.6 / 10.1; from 4 rows the kernels are bound by arithmetic
// and the shapes are level (medians of 15 passes over 160 MiB of distinct matrices, side by
// side in one session).
template <class K>
void over_panels(const DotParams& p) {
  const std::size_t row_bytes = std::max<std::size_t>(1, p.w->row_bytes());
  const auto panel = static_cast<std::int64_t>(std::max<std::size_t>(4, 16384 / row_bytes / 4 * 4));
  for (std::int64_t r0 = p.row_begin; r0 < p.row_end; r0 += panel) {
    const std::int64_t r1 = std::min(p.row_end, r0 + panel);
    std::int64_t i0 = 0;
    for (; i0 + 4 <= p.m; i0 += 4) rows<K, 4>(p, r0, r1, i0);
    switch (p.m - i0) {
      case 3: rows<K, 3>(p, r0, r1, i0); break;
      case 2: rows<K, 2>(p, r0, r1, i0); break;
      case 1: rows<K, 1>(p, r0, r1, i0); break;
      default: break;
    }
  }
}

// As model::dequantize (Q4_1: q * d, then + m; two roundings, no fused multiply-add), 8 values
// at a time for the integer types; the others go to it.
void dequantize_row(DType t, const std::byte* row, std::int64_t k, float* out) {
  if (t != DType::q4_0 && t != DType::q4_1 && t != DType::q8_0) {
    model::dequantize(t, row, std::span<float>(out, static_cast<std::size_t>(k)));
    return;
  }
  const std::size_t bytes = t == DType::q8_0 ? 34 : t == DType::q4_0 ? 18 : 20;
  for (std::int64_t b = 0; b < k / act_block; ++b, row += bytes, out += act_block) {
    const __m256 d = _mm256_set1_ps(f16(row));
    __m256i lo, hi;
    if (t == DType::q8_0) {
      const auto* q = reinterpret_cast<const __m128i*>(row + 2);
      lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(q));
      hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(q + 1));
    } else {
      unpack_nibbles(row + (t == DType::q4_1 ? 4 : 2), lo, hi);
      if (t == DType::q4_0) {
        lo = _mm256_sub_epi16(lo, _mm256_set1_epi16(8));
        hi = _mm256_sub_epi16(hi, _mm256_set1_epi16(8));
      }
    }
    const __m256i parts[4] = {_mm256_cvtepi16_epi32(_mm256_castsi256_si128(lo)), _mm256_cvtepi16_epi32(_mm256_extracti128_si256(lo, 1)),
                              _mm256_cvtepi16_epi32(_mm256_castsi256_si128(hi)), _mm256_cvtepi16_epi32(_mm256_extracti128_si256(hi, 1))};
    for (int j = 0; j < 4; ++j) {
      __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(parts[j]), d);
      if (t == DType::q4_1) v = _mm256_add_ps(v, _mm256_set1_ps(f16(row + 2)));
      _mm256_storeu_ps(out + 8 * j, v);
    }
  }
}

template <DType T>
void dot_integer(const DotParams& p) {
  over_panels<IntegerKernel<T>>(p);
}

template <bool BF16>
void dot_half(const DotParams& p) {
  over_panels<HalfKernel<BF16>>(p);
}

}  // namespace

namespace detail {
const DotKernels* avx2_kernels_if_built() {
  static const DotKernels k{"avx2", quantize, dequantize_row, dot_integer<DType::q8_0>, dot_integer<DType::q4_0>,
                            dot_integer<DType::q4_1>, dot_half<false>, dot_half<true>};
  return &k;
}
}  // namespace detail

}  // namespace actorlm::kernels::cpu

#else

namespace actorlm::kernels::cpu::detail {
const DotKernels* avx2_kernels_if_built() { return nullptr; }
}  // namespace actorlm::kernels::cpu::detail

#endif
