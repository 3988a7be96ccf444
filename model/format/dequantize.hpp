#pragma once
// Conversion of stored tensor data to float. Block formats follow ggml: Q8_0 is 32 values per
// block {f16 scale, 32 x int8}; Q4_0 {f16 scale, 16 bytes of 4-bit codes, value = (q - 8) * d};
// Q4_1 {f16 scale, f16 min, 16 bytes of 4-bit codes, value = q * d + m}. In a 4-bit block the
// low nibbles of the 16 bytes are values 0..15 and the high nibbles values 16..31.

#include "model/format/tensor_source.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace actorlm::model {

// Elements per block: 1 for f32/f16/bf16, 32 for the quantized types.
std::int64_t block_elements(DType t);
// Bytes for `n` elements; std::nullopt when n is not a whole number of blocks (or overflows).
std::optional<std::uint64_t> storage_bytes(DType t, std::int64_t n);

// src holds exactly storage_bytes(t, out.size()) bytes.
void dequantize(DType t, const std::byte* src, std::span<float> out);

// Stored data carries no alignment promise (general.alignment may be 1): read through memcpy.
inline std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
float f16_to_f32(std::uint16_t h);
float bf16_to_f32(std::uint16_t h);

}  // namespace actorlm::model
