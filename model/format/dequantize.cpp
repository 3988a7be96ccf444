#include "model/format/dequantize.hpp"

#include <bit>
#include <cstring>
#include <limits>

namespace actorlm::model {

namespace {

constexpr std::int64_t kBlock = 32;  // values per Q8_0 / Q4_0 / Q4_1 block (ggml's QK8_0, QK4_x)

// Bytes per block (ggml's sizeof(block_q8_0) etc.): f16 scale (+ f16 min) + codes.
constexpr std::uint64_t kQ8_0Bytes = 2 + 32;
constexpr std::uint64_t kQ4_0Bytes = 2 + 16;
constexpr std::uint64_t kQ4_1Bytes = 2 + 2 + 16;

std::uint64_t block_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::q8_0: return kQ8_0Bytes;
    case DType::q4_0: return kQ4_0Bytes;
    case DType::q4_1: return kQ4_1Bytes;
  }
  return 0;
}

}  // namespace

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, or nan keeping its payload
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal: mant * 2^-24. Shift the leading one up to the implicit bit, one exponent step
    // per shift; f32 has room for every f16 subnormal as a normal number.
    std::uint32_t e = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

std::int64_t block_elements(DType t) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return 1;
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1: return kBlock;
  }
  return 1;
}

std::optional<std::uint64_t> storage_bytes(DType t, std::int64_t n) {
  const std::int64_t per = block_elements(t);
  if (n < 0 || n % per != 0) return std::nullopt;
  const auto blocks = static_cast<std::uint64_t>(n / per);
  const std::uint64_t bytes = block_bytes(t);
  if (blocks > std::numeric_limits<std::uint64_t>::max() / bytes) return std::nullopt;
  return blocks * bytes;
}

void dequantize(DType t, const std::byte* src, std::span<float> out) {
  float* y = out.data();
  const std::size_t n = out.size();
  switch (t) {
    case DType::f32:
      if (n > 0) std::memcpy(y, src, n * sizeof(float));
      return;
    case DType::f16:
      for (std::size_t i = 0; i < n; ++i) y[i] = f16_to_f32(load_u16(src + 2 * i));
      return;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) y[i] = bf16_to_f32(load_u16(src + 2 * i));
      return;
    case DType::q8_0:
      // ggml dequantize_row_q8_0: y = q * d.
      for (std::size_t b = 0; b < n / kBlock; ++b, src += kQ8_0Bytes, y += kBlock) {
        const float d = f16_to_f32(load_u16(src));
        const auto* q = reinterpret_cast<const std::int8_t*>(src + 2);
        for (std::int64_t j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j]) * d;
      }
      return;
    case DType::q4_0:
      // ggml dequantize_row_q4_0: y[j] = (lo - 8) * d, y[j + 16] = (hi - 8) * d.
      for (std::size_t b = 0; b < n / kBlock; ++b, src += kQ4_0Bytes, y += kBlock) {
        const float d = f16_to_f32(load_u16(src));
        const auto* qs = reinterpret_cast<const std::uint8_t*>(src + 2);
        for (std::int64_t j = 0; j < kBlock / 2; ++j) {
          y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
          y[j + kBlock / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
        }
      }
      return;
    case DType::q4_1:
      // ggml dequantize_row_q4_1: y[j] = lo * d + m, y[j + 16] = hi * d + m (two roundings).
      for (std::size_t b = 0; b < n / kBlock; ++b, src += kQ4_1Bytes, y += kBlock) {
        const float d = f16_to_f32(load_u16(src));
        const float m = f16_to_f32(load_u16(src + 2));
        const auto* qs = reinterpret_cast<const std::uint8_t*>(src + 4);
        for (std::int64_t j = 0; j < kBlock / 2; ++j) {
          const float lo = static_cast<float>(qs[j] & 0x0f) * d;
          const float hi = static_cast<float>(qs[j] >> 4) * d;
          y[j] = lo + m;
          y[j + kBlock / 2] = hi + m;
        }
      }
      return;
  }
}

}  // namespace actorlm::model
