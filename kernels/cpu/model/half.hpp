#pragma once
// IEEE binary16 ("f16") <-> float for the cpu backend's KV cache: a scalar version and an F16C
// one (`vcvtps2ph` with round-to-nearest-even, `vcvtph2ps`), bit-identical for every input
// (NaNs included: quieted, payload truncated), chosen once by CPU features.
// Also the attention's two inner loops over an f16 row, converting in registers, by row and by
// block of rows, and the block loops over float rows.

#include <cstddef>
#include <cstdint>

namespace actorlm::kernels::cpu {

struct HalfKernels {
  const char* name;
  void (*to_half)(const float* x, std::uint16_t* y, std::size_t n);   // round to nearest even
  void (*to_float)(const std::uint16_t* x, float* y, std::size_t n);  // exact
  // sum_i a[i] * b[i] over n, in the order of paged_attention.cpp's float dot: eight lanes of
  // partial sums, then pairs, then the tail.
  float (*dot)(const float* a, const std::uint16_t* b, std::int32_t n);
  void (*axpy)(float a, const std::uint16_t* x, float* y, std::int32_t n);  // y += a * x
  // The same two loops over `rows` consecutive rows of n (one KV block's positions of one head)
  // in one call: out[r] = scale * dot(q, k + r * n), and y += (w[r] * inv) * v_r in order of r.
  // Bit for bit what calling dot / axpy row by row gives.
  void (*scores)(const float* q, const std::uint16_t* k, std::int32_t rows, std::int32_t n, float scale, float* out);
  void (*accumulate)(const float* w, float inv, const std::uint16_t* v, std::int32_t rows, std::int32_t n, float* y);
  // The same two block loops over float rows (an f32 plane, or f16 rows widened once for the
  // query heads that share them): the same order, so the same bits as on the f16 rows they
  // were widened from.
  void (*scores_f32)(const float* q, const float* k, std::int32_t rows, std::int32_t n, float scale, float* out);
  void (*accumulate_f32)(const float* w, float inv, const float* v, std::int32_t rows, std::int32_t n, float* y);
};

const HalfKernels& scalar_half_kernels();
const HalfKernels* f16c_half_kernels();  // nullptr where the CPU lacks AVX2, FMA or F16C
const HalfKernels& best_half_kernels();

std::uint16_t float_to_half(float);  // scalar, round to nearest even
float half_to_float(std::uint16_t);  // scalar, exact

}  // namespace actorlm::kernels::cpu
