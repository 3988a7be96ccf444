#pragma once
// The per-element math of the cuda backend's element-wise kernels (kernels/cuda/elementwise.cu),
// written once for the device and the host: the CPU test suite runs these functions against the
// cpu backend's kernels (kernels/cpu/model/ops.hpp), so what the GPU computes is checked on any
// machine. Plain C++ when compiled without nvcc (no CUDA header needed).

#include "kernels/cuda/host_device.hpp"

#include <cmath>
#include <cstdint>

namespace actorlm::kernels::cuda_math {

// SiLU(gate) * up, as the cpu backend's silu_mul.
ACTORLM_HD inline float silu_mul(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// Exact (erf) GELU, as torch.nn.GELU() and the cpu backend's gelu.
ACTORLM_HD inline float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

// RMSNorm's factor from a row's mean of squares: x * rms_scale(mean, eps) * weight.
ACTORLM_HD inline float rms_scale(float mean_square, float eps) { return 1.0f / sqrtf(mean_square + eps); }

// LayerNorm's factor from a row's variance: (x - mean) * layer_scale(var, eps) * weight + bias.
ACTORLM_HD inline float layer_scale(float variance, float eps) { return 1.0f / sqrtf(variance + eps); }

// Rotary embeddings. inv_freq(i) = theta^(-2i / head_dim), computed in double and rounded to
// float as HF does; the launcher computes the table on the host with this function, so host
// and device rotate by the same frequencies.
inline float rope_inv_freq(float theta, std::int32_t head_dim, std::int32_t i) {
  return static_cast<float>(1.0 / std::pow(double(theta), 2.0 * i / head_dim));
}

// The two elements of a head that pair i of [0, head_dim / 2) rotates: halves (HF checkpoints,
// model::RopeStyle::halves) or adjacent pairs (GGUF Llama, permuted by llama.cpp's converter).
// A bool, not the RopeStyle: model/arch is C++20, which nvcc's C++17 here cannot read.
struct RopePair {
  std::int32_t a, b;
};
ACTORLM_HD inline RopePair rope_pair(bool halves, std::int32_t half, std::int32_t i) {
  return halves ? RopePair{i, i + half} : RopePair{2 * i, 2 * i + 1};
}

// The angle of pair i at `position`, positions divided by the linear scaling factor first.
ACTORLM_HD inline float rope_angle(std::int32_t position, float linear_factor, float inv_freq) {
  return static_cast<float>(position) / linear_factor * inv_freq;
}

// a * b rounded on its own: nvcc contracts a * b + c into a fused multiply-add by default, and may
// choose which product to fuse differently where the same code is inlined into different kernels
// (rotary in `rope` and in `rope_and_cache`, which must give the same bits). __fmul_rn is never
// contracted; the host (x86-64 without FMA, and the emulation's -ffp-contract=off) rounds each
// product anyway, as the cpu backend does.
ACTORLM_HD inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// (x0, x1) rotated by the angle whose cosine and sine are c and s.
ACTORLM_HD inline void rope_rotate(float& x0, float& x1, float c, float s) {
  const float a = mul_rn(x0, c) - mul_rn(x1, s);
  const float b = mul_rn(x1, c) + mul_rn(x0, s);
  x0 = a;
  x1 = b;
}

// The KV cache slot of `position` through a sequence's block table (the block manager's slot
// mapping): block table[position / block_size], offset position % block_size within it.
ACTORLM_HD inline std::uint64_t paged_slot(const std::uint32_t* table, std::uint32_t block_size,
                                           std::uint32_t position) {
  return std::uint64_t(table[position / block_size]) * block_size + position % block_size;
}

// Where element d of KV head h of a slot sits in one layer's K or V plane, laid out as the cpu
// cache's ([num_blocks, kv_heads, block_size, head_dim], kernels/cpu/model/paged_attention.hpp).
ACTORLM_HD inline std::uint64_t kv_plane_index(std::uint64_t slot, std::uint32_t block_size, std::int32_t kv_heads,
                                               std::int32_t head_dim, std::int32_t h, std::int32_t d) {
  return ((slot / block_size * std::uint64_t(kv_heads) + std::uint64_t(h)) * block_size + slot % block_size) *
             std::uint64_t(head_dim) +
         std::uint64_t(d);
}

// Split-K attention partials (flash-decoding): chunk c of a row holds its own maximum m_c, its
// sum of exp(s - m_c) l_c and its weighted values acc_c. Merged over the chunks with M the
// largest m_c: out = sum_c w_c acc_c / sum_c w_c l_c, w_c = merge_weight(m_c, M).
ACTORLM_HD inline float merge_weight(float chunk_max, float row_max) { return expf(chunk_max - row_max); }

}  // namespace actorlm::kernels::cuda_math
