// quant_dot.hpp's kernels with AVX2 + FMA + F16C (the code after the includes is compiled for
// them; quant_dot_scalar.cpp calls in only when the CPU has them). Integer kernels: a group of
// 16 weight rows is read as two halves of 8 lanes; a code unit's 16 bytes widened to int16 meet a
// broadcast activation pair in _mm256_madd_epi16 (8 int32 lanes, one weight row each), summed
// over the block in int32 (|w| <= 128, |q| <= 32768, 32 products: under 2^27, exact).
#include "kernels/cpu/model/quant_dot.hpp"

#include "kernels/cpu/model/row_groups.hpp"
#include "model/format/dequantize.hpp"

#if defined(__x86_64__) && defined(__GNUC__)  // GCC, or clang (which defines __GNUC__ too)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

// After the includes, so that the headers' inline functions (merged across files by the linker)
// stay compiled for the baseline CPU.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace actorlm::kernels::cpu {

namespace {

using model::DType;
using model::load_u16;

// A fixed order of additions, the same for every output element.
float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void quantize(const float* x, std::int64_t k, Q16Block* out_blocks, std::int64_t stride) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (std::int64_t b = 0; b < k / act_block; ++b, x += act_block) {
    Q16Block* out = out_blocks + b * stride;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
#pragma GCC unroll 4
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
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j)
      i[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // packs (saturating) interleaves 128-bit lanes; the 64-bit permutation restores the order.
    const __m256i q01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i[0], i[1]), _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i q23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i[2], i[3]), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q), q01);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q + 16), q23);
    // The sum of the stored (saturated) codes, as the scalar path adds them.
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i sum32 = _mm256_add_epi32(_mm256_madd_epi16(q01, ones), _mm256_madd_epi16(q23, ones));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum32), _mm256_extracti128_si256(sum32, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    out->d = d;
    out->s = d * static_cast<float>(_mm_cvtsi128_si32(s));
  }
}

// One half (8 rows) of a group's block: code unit u widened to int16 lanes, two per row.
template <DType T>
struct GroupHalf;
template <>
struct GroupHalf<DType::q8_0> {
  static constexpr int units = 16;
  static void load(const std::byte* unit, __m256i* w) {
    w[0] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(unit)));
  }
};
template <DType T>
struct Nibbles {
  static constexpr int units = 8;
  // w[0]: values 2u, 2u + 1 (low nibbles); w[1]: values 2u + 16, 2u + 17 (high nibbles).
  static void load(const std::byte* unit, __m256i* w) {
    const __m256i t = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(unit)));
    w[0] = _mm256_and_si256(t, _mm256_set1_epi16(0x0f));
    w[1] = _mm256_srli_epi16(t, 4);
    if constexpr (T == DType::q4_0) {
      w[0] = _mm256_sub_epi16(w[0], _mm256_set1_epi16(8));
      w[1] = _mm256_sub_epi16(w[1], _mm256_set1_epi16(8));
    }
  }
};
template <>
struct GroupHalf<DType::q4_0> : Nibbles<DType::q4_0> {};
template <>
struct GroupHalf<DType::q4_1> : Nibbles<DType::q4_1> {};

// A broadcast pair of activations: values v, v + 1 of a block.
__m256i pair(const Q16Block& x, int v) {
  std::int32_t p;
  std::memcpy(&p, x.q + v, sizeof p);
  return _mm256_set1_epi32(p);
}

// Rows 16g + 8h .. + 8 (half h of group g) against activation rows x[0 .. R) of a tile: one
// register of 8 row sums per activation row.
template <DType T, int R>
void group_half_tile(const DotParams& p, std::int64_t g, int h, const Q16Block* x, float* y) {
  using H = GroupHalf<T>;
  const std::int64_t nb = p.w->cols / act_block;
  const std::size_t gb = group_block_bytes(T);
  const std::byte* blk = p.w->data.data() + static_cast<std::size_t>(g * nb) * gb;
  __m256 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b, blk += gb, x += act_tile) {
    const std::byte* codes = blk + group_codes_offset(T) + 16 * h;
    __m256i sum[R];
#pragma GCC unroll 16
    for (int u = 0; u < H::units; ++u) {
      __m256i w[2];
      H::load(codes + 32 * u, w);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        // Q8_0: unit u is values 2u, 2u + 1; 4-bit: 2u, 2u + 1 and 2u + 16, 2u + 17.
        __m256i s = _mm256_madd_epi16(w[0], pair(x[i], 2 * u));
        if constexpr (T != DType::q8_0) s = _mm256_add_epi32(s, _mm256_madd_epi16(w[1], pair(x[i], 2 * u + 16)));
        sum[i] = u == 0 ? s : _mm256_add_epi32(sum[i], s);
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * h)));
    __m256 mw = _mm256_setzero_ps();
    if constexpr (T == DType::q4_1) mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * h)));
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[i]), _mm256_mul_ps(dw, _mm256_set1_ps(x[i].d)), acc[i]);
      if constexpr (T == DType::q4_1) acc[i] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x[i].s), acc[i]);
    }
  }
  const std::int64_t r0 = g * row_group + 8 * h, valid = std::min<std::int64_t>(8, p.w->rows - r0);
  if (valid == 8) {
    for (int i = 0; i < R; ++i) _mm256_storeu_ps(y + i * p.ldy + r0, acc[i]);
    return;
  }
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)), lanes);
  for (int i = 0; i < R; ++i) _mm256_maskstore_ps(y + i * p.ldy + r0, mask, acc[i]);
}

// Tiles of 4 activation rows, each against both halves of a group.
template <DType T>
void dot_integer(const DotParams& p) {
  const std::int64_t nb = p.w->cols / act_block;
  for_each_group_tile(p, 4, [&](std::int64_t g, std::int64_t i0, std::int64_t rows) {
    const Q16Block* x = p.xq + (i0 / act_tile) * nb * act_tile + i0 % act_tile;
    float* y = p.y + i0 * p.ldy;
    for (int h = 0; h < 2 && g * row_group + 8 * h < p.w->rows; ++h) {
      switch (rows) {
        case 4: group_half_tile<T, 4>(p, g, h, x, y); break;
        case 3: group_half_tile<T, 3>(p, g, h, x, y); break;
        case 2: group_half_tile<T, 2>(p, g, h, x, y); break;
        default: group_half_tile<T, 1>(p, g, h, x, y); break;
      }
    }
  });
}

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
// interleaved streams of a few hundred bytes each, which it does not (measured when the integer
// types had row-layout kernels of this shape too): one thread streamed
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

template <bool BF16>
void dot_half(const DotParams& p) {
  over_panels<HalfKernel<BF16>>(p);
}

}  // namespace

namespace detail {
const DotKernels* avx2_kernels_if_built() {
  static const DotKernels k{"avx2", quantize, dot_integer<DType::q8_0>, dot_integer<DType::q4_0>,
                            dot_integer<DType::q4_1>, dot_half<false>, dot_half<true>};
  return &k;
}
}  // namespace detail

}  // namespace actorlm::kernels::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else

namespace actorlm::kernels::cpu::detail {
const DotKernels* avx2_kernels_if_built() { return nullptr; }
}  // namespace actorlm::kernels::cpu::detail

#endif
