// The scalar reference of quant_dot.hpp's kernels, and the runtime choice among the paths.
#include "kernels/cpu/model/quant_dot.hpp"

#include "kernels/cpu/model/row_groups.hpp"

#include "model/format/dequantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace actorlm::kernels::cpu {

namespace {

using model::DType;
using model::load_u16;

void quantize(const float* x, std::int64_t k, Q16Block* out, std::int64_t stride) {
  for (std::int64_t b = 0; b < k / act_block; ++b, x += act_block) {
    Q16Block& o = out[b * stride];
    float amax = 0;
    for (std::int64_t j = 0; j < act_block; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 32767.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::int32_t sum = 0;
    for (std::int64_t j = 0; j < act_block; ++j) {
      // Half to even, saturated as AVX2's packs does (x * id is within rounding of +-32767).
      const float q = std::clamp(std::nearbyint(x[j] * id), -32768.0f, 32767.0f);
      o.q[j] = static_cast<std::int16_t>(q);
      sum += o.q[j];
    }
    o.d = d;
    o.s = d * static_cast<float>(sum);
  }
}

// Row l's code for value v of a grouped block's codes (row_groups.hpp).
template <DType T>
std::int32_t code(const std::byte* codes, std::int64_t l, int v) {
  if constexpr (T == DType::q8_0) return static_cast<std::int8_t>(codes[32 * (v / 2) + 2 * l + v % 2]);
  const int u = (v % 16) / 2, t = v % 2;
  const auto byte = static_cast<std::uint8_t>(codes[32 * u + 2 * l + t]);
  const std::int32_t c = v < 16 ? (byte & 0x0f) : (byte >> 4);
  return T == DType::q4_0 ? c - 8 : c;
}

// quant_dot.hpp's arithmetic, one output element at a time.
template <DType T>
void dot_integer(const DotParams& p) {
  const WeightMatrix& w = *p.w;
  const std::int64_t nb = w.cols / act_block;
  const std::size_t gb = group_block_bytes(T), codes = group_codes_offset(T);
  for (std::int64_t r = p.row_begin; r < p.row_end; ++r) {
    const std::int64_t l = r % row_group;
    const std::byte* group = w.data.data() + static_cast<std::size_t>(r / row_group * nb) * gb;
    for (std::int64_t i = 0; i < p.m; ++i) {
      const Q16Block* x = p.xq + (i / act_tile) * nb * act_tile + i % act_tile;
      float acc = 0;
      for (std::int64_t b = 0; b < nb; ++b, x += act_tile) {
        const std::byte* blk = group + static_cast<std::size_t>(b) * gb;
        std::int32_t sum = 0;
        for (int v = 0; v < act_block; ++v) sum += code<T>(blk + codes, l, v) * x->q[v];
        acc = std::fma(static_cast<float>(sum), model::f16_to_f32(load_u16(blk + 2 * l)) * x->d, acc);
        if constexpr (T == DType::q4_1) acc = std::fma(model::f16_to_f32(load_u16(blk + 32 + 2 * l)), x->s, acc);
      }
      p.y[i * p.ldy + r] = acc;
    }
  }
}

template <float (*Widen)(std::uint16_t)>
void dot_half(const DotParams& p) {
  const std::int64_t k = p.w->cols;
  for (std::int64_t r = p.row_begin; r < p.row_end; ++r)
    for (std::int64_t i = 0; i < p.m; ++i) {
      const std::byte* wr = p.w->row(r);
      const float* x = p.x + i * k;
      float acc = 0;
      for (std::int64_t j = 0; j < k; ++j) acc += Widen(load_u16(wr + 2 * j)) * x[j];
      p.y[i * p.ldy + r] = acc;
    }
}

bool cpu_has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

}  // namespace

DotKernel DotKernels::for_type(model::DType t) const {
  switch (t) {
    case DType::q8_0: return q8_0;
    case DType::q4_0: return q4_0;
    case DType::q4_1: return q4_1;
    case DType::f16: return f16;
    case DType::bf16: return bf16;
    case DType::f32: return nullptr;
  }
  return nullptr;
}

bool is_integer_type(model::DType t) {
  return t == DType::q8_0 || t == DType::q4_0 || t == DType::q4_1;
}

void quantize_rows(const DotKernels& kernels, const float* x, std::int64_t k, std::int64_t begin, std::int64_t end,
                   Q16Block* xq) {
  const std::int64_t nb = k / act_block;
  for (std::int64_t i = begin; i < end; ++i)
    kernels.quantize(x + i * k, k, xq + (i / act_tile) * nb * act_tile + i % act_tile, act_tile);
}

const DotKernels& scalar_kernels() {
  static const DotKernels k{"scalar", quantize, dot_integer<DType::q8_0>, dot_integer<DType::q4_0>,
                            dot_integer<DType::q4_1>, dot_half<model::f16_to_f32>, dot_half<model::bf16_to_f32>};
  return k;
}

namespace detail {
const DotKernels* avx2_kernels_if_built();    // quant_dot_avx2.cpp
const DotKernels* avx512_kernels_if_built();  // quant_dot_avx512.cpp
}

const DotKernels* avx2_kernels() {
  static const DotKernels* k = cpu_has_avx2() ? detail::avx2_kernels_if_built() : nullptr;
  return k;
}

const DotKernels* avx512_kernels() {
  static const DotKernels* k = cpu_has_avx2() && cpu_has_avx512() ? detail::avx512_kernels_if_built() : nullptr;
  return k;
}

const DotKernels& best_kernels() {
  static const DotKernels& k = avx512_kernels() ? *avx512_kernels() : avx2_kernels() ? *avx2_kernels() : scalar_kernels();
  return k;
}

}  // namespace actorlm::kernels::cpu
