#pragma once
// The cuda backend's element-wise operators of the model forward: RMSNorm, LayerNorm, rotary
// embeddings, SiLU-and-mul and GELU, on activations in f32, f16 or bf16 (arithmetic in f32).
// Each is one launch on the caller's stream; the per-element math is elementwise_math.hpp's,
// the same functions the CPU test suite checks against the cpu backend's kernels
// (kernels/cpu/model/ops.hpp). Shapes are written beside every pointer; all pointers are device
// memory unless said otherwise. Compiled as C++17 (CMake 3.25 has no CUDA20 dialect).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace actorlm::kernels::cuda {

enum class ActDtype : std::uint8_t { f32, f16, bf16 };

inline std::size_t act_bytes(ActDtype d) { return d == ActDtype::f32 ? 4 : 2; }

// out[rows, n] = x * rsqrt(mean(x^2) + eps) * weight, per row (the sum of squares in f32, one
// thread block per row). out may alias x. With `residual`: residual += x first (rounded to dtype,
// as add_in_place), and the sum is what is normalised: the residual stream's add and the next
// norm in one launch (neither out nor x may be the residual then).
struct RmsNormParams {
  const void* x = nullptr;          // [rows, n] of dtype
  const float* weight = nullptr;    // [n]
  void* out = nullptr;              // [rows, n] of dtype
  std::int64_t rows = 0, n = 0;
  float eps = 1e-5f;
  ActDtype dtype = ActDtype::f32;
  void* residual = nullptr;         // [rows, n] of dtype, or null
};
void rms_norm(const RmsNormParams&, cudaStream_t stream);

// out[rows, n] = (x - mean) * rsqrt(var + eps) * weight + bias, per row. out may alias x.
// `residual` as RmsNormParams'.
struct LayerNormParams {
  const void* x = nullptr;          // [rows, n] of dtype
  const float* weight = nullptr;    // [n]
  const float* bias = nullptr;      // [n]
  void* out = nullptr;              // [rows, n] of dtype
  std::int64_t rows = 0, n = 0;
  float eps = 1e-5f;
  ActDtype dtype = ActDtype::f32;
  void* residual = nullptr;         // [rows, n] of dtype, or null
};
void layer_norm(const LayerNormParams&, cudaStream_t stream);

// Rotates `heads` heads of each row in place: row r of x ([rows, row_stride] elements) holds
// the heads at [heads, head_dim] from its start and sits at position positions[r].
struct RopeParams {
  void* x = nullptr;                    // [rows, row_stride] of dtype
  const std::int32_t* positions = nullptr;  // [rows]
  const float* inv_freq = nullptr;      // [head_dim / 2]: rope_inv_freq_table's
  std::int64_t rows = 0, row_stride = 0;
  std::int32_t heads = 0, head_dim = 0;
  float linear_factor = 1.0f;
  bool halves = true;                   // model::RopeStyle::halves; false: adjacent pairs
  ActDtype dtype = ActDtype::f32;
};
void apply_rope(const RopeParams&, cudaStream_t stream);

// The rotary frequencies of RopeParams::inv_freq, on the host: [head_dim / 2].
void rope_inv_freq_table(float theta, std::int32_t head_dim, float* out_host);

// out[rows, f] = silu(gate) * up, gate_up[rows, 2 f] being the gate columns then the up columns.
struct SiluMulParams {
  const void* gate_up = nullptr;    // [rows, 2 f] of dtype
  void* out = nullptr;              // [rows, f] of dtype
  std::int64_t rows = 0, f = 0;
  ActDtype dtype = ActDtype::f32;
};
void silu_mul(const SiluMulParams&, cudaStream_t stream);

// x[n] = gelu(x), in place (exact erf form).
void gelu(void* x, std::int64_t n, ActDtype dtype, cudaStream_t stream);

// y[n] += x[n], in place (the residual stream's adds).
void add_in_place(void* y, const void* x, std::int64_t n, ActDtype dtype, cudaStream_t stream);

// out[n] = in[n] converted from in_dtype to out_dtype (rounded to nearest even when narrowing):
// weights uploaded as f32 and kept in f16 or bf16.
void convert(const void* in, ActDtype in_dtype, void* out, ActDtype out_dtype, std::int64_t n, cudaStream_t stream);

}  // namespace actorlm::kernels::cuda
