// quant_dot.hpp's integer kernels with AVX-512 VNNI (the code after the includes is compiled for
// AVX-512 F / BW / VL / VNNI, AVX2, FMA, F16C; quant_dot_scalar.cpp calls in only when the CPU has
// them). A group of 16 weight rows is one register wide: a code unit's 32 bytes
// widened to int16 meet a broadcast activation pair in vpdpwssd (16 int32 lanes, one weight row
// each), summed over the block in int32 (under 2^27, exact). F16 / BF16 and the quantization are
// the AVX2 path's.
//
// Measured on 2 Zen 4 vCPUs, all of a decode step's GEMMs of SmolLM2-135M (Q4_1 layers, Q8_0
// output matrix), medians of 20 passes, side by side with the row-layout AVX2 kernels (and their
// sgemm panels from 96 rows) that came before: m = 1: 4.53 -> 3.62 ms (26.6 GB/s); m = 4: 11.1
// -> 5.8 ms; m = 16: 36.3 -> 14.4 ms; m = 64: 137 -> 53 ms; m = 512: 1,273 -> 509 ms.
#include "kernels/cpu/model/quant_dot.hpp"

#include "kernels/cpu/model/row_groups.hpp"

#if defined(__x86_64__) && defined(__GNUC__)  // GCC, or clang (which defines __GNUC__ too)

#include <immintrin.h>

#include <algorithm>

// After the includes, so that the headers' inline functions (merged across files by the linker)
// stay compiled for the baseline CPU.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
// GCC 12 warns of the _mm512_undefined_ps() that its own _mm512_cvtph_ps / _mm512_cvtepi32_ps
// pass as the unused merge source.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace actorlm::kernels::cpu {

namespace {

using model::DType;

// sum += w . (values v, v + 1 of block x in every lane). The pair is broadcast from memory by
// the instruction itself ({1to16}): GCC emits a separate vpbroadcastd for _mm512_set1_epi32,
// 128 more instructions per block of an 8-row tile.
__m512i dot(__m512i sum, __m512i w, const Q16Block& x, int v) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(sum) : "v"(w), "m"(*reinterpret_cast<const std::int32_t*>(x.q + v)));
  return sum;
}

// Group g (rows 16g .. 16g + 15) against activation rows x[0 .. R) of a tile. A sums per row
// (independent vpdpwssd chains where R is too small to hide its latency; integer addition, so
// their split does not change a bit).
template <DType T, int R, int A>
void tile(const DotParams& p, std::int64_t g, const Q16Block* x, float* y) {
  const std::int64_t nb = p.w->cols / act_block;
  const std::size_t gb = group_block_bytes(T);
  const std::byte* blk = p.w->data.data() + static_cast<std::size_t>(g * nb) * gb;
  __m512 acc[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b, blk += gb, x += act_tile) {
    const std::byte* codes = blk + group_codes_offset(T);
    __m512i sum[R][A];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int a = 0; a < A; ++a) sum[i][a] = _mm512_setzero_si512();
    if constexpr (T == DType::q8_0) {
#pragma GCC unroll 16
      for (int u = 0; u < 16; ++u) {
        const __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32 * u)));
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) sum[i][u % A] = dot(sum[i][u % A], w, x[i], 2 * u);
      }
    } else {
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) {
        const __m512i t = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32 * u)));
        __m512i lo = _mm512_and_si512(t, _mm512_set1_epi16(0x0f)), hi = _mm512_srli_epi16(t, 4);
        if constexpr (T == DType::q4_0) {
          lo = _mm512_sub_epi16(lo, _mm512_set1_epi16(8));
          hi = _mm512_sub_epi16(hi, _mm512_set1_epi16(8));
        }
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          const int a = (2 * u) % A, a2 = (2 * u + 1) % A;
          sum[i][a] = dot(sum[i][a], lo, x[i], 2 * u);
          sum[i][a2] = dot(sum[i][a2], hi, x[i], 2 * u + 16);
        }
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512 mw = _mm512_setzero_ps();
    if constexpr (T == DType::q4_1) mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      __m512i s = sum[i][0];
#pragma GCC unroll 4
      for (int a = 1; a < A; ++a) s = _mm512_add_epi32(s, sum[i][a]);
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(x[i].d)), acc[i]);
      if constexpr (T == DType::q4_1) acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x[i].s), acc[i]);
    }
  }
  const std::int64_t r0 = g * row_group, valid = std::min<std::int64_t>(row_group, p.w->rows - r0);
  const auto mask = static_cast<__mmask16>((1u << valid) - 1);
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) _mm512_mask_storeu_ps(y + i * p.ldy + r0, mask, acc[i]);
}

template <DType T>
void dot_integer(const DotParams& p) {
  const std::int64_t nb = p.w->cols / act_block;
  for_each_group_tile(p, act_tile, [&](std::int64_t g, std::int64_t i0, std::int64_t rows) {
    const Q16Block* x = p.xq + i0 * nb;  // i0 is a whole tile
    float* y = p.y + i0 * p.ldy;
    switch (rows) {
      case 8: tile<T, 8, 1>(p, g, x, y); break;
      case 7: tile<T, 7, 1>(p, g, x, y); break;
      case 6: tile<T, 6, 1>(p, g, x, y); break;
      case 5: tile<T, 5, 1>(p, g, x, y); break;
      case 4: tile<T, 4, 1>(p, g, x, y); break;
      case 3: tile<T, 3, 2>(p, g, x, y); break;
      case 2: tile<T, 2, 2>(p, g, x, y); break;
      default: tile<T, 1, 4>(p, g, x, y); break;
    }
  });
}

}  // namespace

namespace detail {
const DotKernels* avx2_kernels_if_built();
const DotKernels* avx512_kernels_if_built() {
  static const DotKernels k = [] {
    DotKernels out = *avx2_kernels_if_built();
    out.name = "avx512";
    out.q8_0 = dot_integer<DType::q8_0>;
    out.q4_0 = dot_integer<DType::q4_0>;
    out.q4_1 = dot_integer<DType::q4_1>;
    return out;
  }();
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
const DotKernels* avx512_kernels_if_built() { return nullptr; }
}  // namespace actorlm::kernels::cpu::detail

#endif
