// The scalar reference of quant_dot.hpp's kernels, and the runtime choice among the paths.
#include "kernels/cpu/model/quant_dot.hpp"

#include "model/format/dequantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace actorlm::kernels::cpu {

namespace {

using model::DType;
using model::load_u16;

void quantize(const float* x, std::int64_t k, Q16Block* out) {
  for (std::int64_t b = 0; b < k / act_block; ++b, x += act_block) {
    float amax = 0;
    for (std::int64_t j = 0; j < act_block; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 32767.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::int32_t sum = 0;
    for (std::int64_t j = 0; j < act_block; ++j) {
      // Half to even, saturated as AVX2's packs does (x * id is within rounding of +-32767).
      const float q = std::clamp(std::nearbyint(x[j] * id), -32768.0f, 32767.0f);
      out[b].q[j] = static_cast<std::int16_t>(q);
      sum += out[b].q[j];
    }
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
  }
}

// One integer type's block: its scale, minimum and the 32 weight codes as integers.
template <DType T>
struct Block;
template <>
struct Block<DType::q8_0> {
  static constexpr std::size_t bytes = 34;
  static void decode(const std::byte* b, float& d, float& m, std::int32_t* w) {
    d = model::f16_to_f32(load_u16(b));
    m = 0;
    for (int j = 0; j < 32; ++j) w[j] = static_cast<std::int8_t>(b[2 + j]);
  }
};
template <>
struct Block<DType::q4_0> {
  static constexpr std::size_t bytes = 18;
  static void decode(const std::byte* b, float& d, float& m, std::int32_t* w) {
    d = model::f16_to_f32(load_u16(b));
    m = 0;
    for (int j = 0; j < 16; ++j) {
      const auto q = static_cast<std::uint8_t>(b[2 + j]);
      w[j] = (q & 0x0f) - 8;
      w[j + 16] = (q >> 4) - 8;
    }
  }
};
template <>
struct Block<DType::q4_1> {
  static constexpr std::size_t bytes = 20;
  static void decode(const std::byte* b, float& d, float& m, std::int32_t* w) {
    d = model::f16_to_f32(load_u16(b));
    m = model::f16_to_f32(load_u16(b + 2));
    for (int j = 0; j < 16; ++j) {
      const auto q = static_cast<std::uint8_t>(b[4 + j]);
      w[j] = q & 0x0f;
      w[j + 16] = q >> 4;
    }
  }
};

void dequantize_row(DType t, const std::byte* row, std::int64_t k, float* out) {
  model::dequantize(t, row, std::span<float>(out, static_cast<std::size_t>(k)));
}

template <DType T>
void dot_integer(const DotParams& p) {
  const std::int64_t nb = p.w->cols / act_block;
  std::int32_t w[32];
  for (std::int64_t r = p.row_begin; r < p.row_end; ++r)
    for (std::int64_t i = 0; i < p.m; ++i) {
      const std::byte* wb = p.w->row(r);
      const Q16Block* x = p.xq + i * nb;
      float acc = 0;
      for (std::int64_t b = 0; b < nb; ++b, wb += Block<T>::bytes) {
        float d = 0, m = 0;
        Block<T>::decode(wb, d, m, w);
        std::int32_t isum = 0;
        for (int j = 0; j < 32; ++j) isum += w[j] * x[b].q[j];
        acc += d * x[b].d * static_cast<float>(isum) + m * x[b].s;
      }
      p.y[i * p.ldy + r] = acc;
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

const DotKernels& scalar_kernels() {
  static const DotKernels k{"scalar", quantize, dequantize_row, dot_integer<DType::q8_0>, dot_integer<DType::q4_0>,
                            dot_integer<DType::q4_1>, dot_half<model::f16_to_f32>, dot_half<model::bf16_to_f32>};
  return k;
}

namespace detail {
const DotKernels* avx2_kernels_if_built();  // quant_dot_avx2.cpp
}

const DotKernels* avx2_kernels() {
  static const DotKernels* k = cpu_has_avx2() ? detail::avx2_kernels_if_built() : nullptr;
  return k;
}

const DotKernels& best_kernels() {
  static const DotKernels& k = avx2_kernels() ? *avx2_kernels() : scalar_kernels();
  return k;
}

}  // namespace actorlm::kernels::cpu
