#pragma once
// One linear layer's weight as a rank holds it: [rows, cols] (PyTorch's [out_features,
// in_features]), row-major, each row stored in `dtype`'s layout (model/format/dequantize.hpp:
// F32, F16, BF16, or 32-value Q8_0 / Q4_0 / Q4_1 blocks), so a quantized model is held and
// streamed at its file size. A row of a block type holds cols / 32 whole blocks. Loading slices
// and joins matrices in this row layout; the integer types (Q8_0, Q4_0, Q4_1) then go to the
// grouped layout their kernels read (row_groups.hpp: group_rows), and stay in it.

#include "model/format/tensor_source.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace actorlm::kernels::cpu {

// How load_weights keeps the checkpoint's matrices: as stored (the default), or dequantized to
// float at load (the path before stored weights, kept for comparison: 4 bytes per weight).
enum class WeightStorage : std::uint8_t { stored, f32 };

struct WeightMatrix {
  model::DType dtype = model::DType::f32;
  std::int64_t rows = 0, cols = 0;
  bool grouped = false;         // row_groups.hpp's layout (integer types only)
  std::vector<std::byte> data;  // [rows, row_bytes()]; grouped: [ceil(rows / 16), cols / 32, 16 rows' block]

  std::size_t row_bytes() const {  // storage_bytes(dtype, cols), inline: kernels ask per row
    const auto c = static_cast<std::size_t>(cols);
    switch (dtype) {
      case model::DType::f32: return c * 4;
      case model::DType::f16:
      case model::DType::bf16: return c * 2;
      case model::DType::q8_0: return c / 32 * 34;
      case model::DType::q4_0: return c / 32 * 18;
      case model::DType::q4_1: return c / 32 * 20;
    }
    return 0;
  }
  // Row r in the row layout (not for a grouped matrix).
  const std::byte* row(std::int64_t r) const { return data.data() + static_cast<std::size_t>(r) * row_bytes(); }
  const float* f32() const { return reinterpret_cast<const float*>(data.data()); }  // dtype f32 only
  std::int64_t size() const { return rows * cols; }  // elements
  bool empty() const { return rows == 0; }
  std::size_t bytes() const { return data.size(); }

  // out[cols] = row r as float (either layout).
  void dequantize_row(std::int64_t r, std::span<float> out) const;
};

// A float matrix [rows, cols] from `values` (rows * cols of them).
WeightMatrix f32_matrix(std::span<const float> values, std::int64_t rows, std::int64_t cols);

// A stored [rows, cols] tensor of `dtype` whose bytes are `bytes`.
WeightMatrix stored_matrix(model::DType dtype, std::span<const std::byte> bytes, std::int64_t rows,
                           std::int64_t cols);

// Rows [begin, begin + count) of `m` (row layout) appended to `out` (same dtype and cols; `out` may be empty).
void append_rows(const WeightMatrix& m, std::int64_t begin, std::int64_t count, WeightMatrix& out);

// Columns [begin, begin + count) of `m` (row layout): kept in m's type when both are whole blocks, else
// dequantized to float (a tensor-parallel split that cuts through a block).
WeightMatrix column_slice(const WeightMatrix& m, std::int64_t begin, std::int64_t count);

}  // namespace actorlm::kernels::cpu
