#include "kernels/cpu/model/weight_matrix.hpp"

#include "kernels/cpu/model/row_groups.hpp"
#include "model/format/dequantize.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace actorlm::kernels::cpu {

namespace {

void require_row_layout(const WeightMatrix& m, const char* what) {
  if (m.grouped) throw std::logic_error(std::string("weight matrix: ") + what + " of a grouped matrix");
}

}  // namespace

void WeightMatrix::dequantize_row(std::int64_t r, std::span<float> out) const {
  if (!grouped) {
    model::dequantize(dtype, row(r), out.first(static_cast<std::size_t>(cols)));
    return;
  }
  std::byte block[64];
  for (std::int64_t b = 0; b < cols / 32; ++b) {
    ungroup_block(*this, r, b, block);
    model::dequantize(dtype, block, out.subspan(static_cast<std::size_t>(b * 32), 32));
  }
}

WeightMatrix f32_matrix(std::span<const float> values, std::int64_t rows, std::int64_t cols) {
  WeightMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.data.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(m.data.data(), values.data(), m.data.size());
  return m;
}

WeightMatrix stored_matrix(model::DType dtype, std::span<const std::byte> bytes, std::int64_t rows,
                           std::int64_t cols) {
  WeightMatrix m;
  m.dtype = dtype;
  m.rows = rows;
  m.cols = cols;
  if (!model::storage_bytes(dtype, cols) || m.row_bytes() * static_cast<std::size_t>(rows) != bytes.size())
    throw std::invalid_argument("weight matrix: " + std::to_string(bytes.size()) + " bytes of " +
                                std::string(model::dtype_name(dtype)) + " do not hold [" + std::to_string(rows) +
                                ", " + std::to_string(cols) + "] in whole rows of blocks");
  m.data.assign(bytes.begin(), bytes.end());
  return m;
}

void append_rows(const WeightMatrix& m, std::int64_t begin, std::int64_t count, WeightMatrix& out) {
  require_row_layout(m, "appending rows");
  require_row_layout(out, "appending rows");
  if (out.empty()) {
    out.dtype = m.dtype;
    out.cols = m.cols;
  }
  if (out.dtype != m.dtype || out.cols != m.cols)
    throw std::logic_error("weight matrix: appending rows of another type or width");
  out.data.insert(out.data.end(), m.data.begin() + static_cast<std::ptrdiff_t>(begin * m.row_bytes()),
                  m.data.begin() + static_cast<std::ptrdiff_t>((begin + count) * m.row_bytes()));
  out.rows += count;
}

WeightMatrix column_slice(const WeightMatrix& m, std::int64_t begin, std::int64_t count) {
  require_row_layout(m, "a column slice");
  const std::int64_t per = model::block_elements(m.dtype);
  WeightMatrix out;
  out.rows = m.rows;
  out.cols = count;
  if (begin % per == 0 && count % per == 0) {
    out.dtype = m.dtype;
    const std::size_t skip = model::storage_bytes(m.dtype, begin).value_or(0), take = out.row_bytes();
    out.data.resize(take * static_cast<std::size_t>(m.rows));
    for (std::int64_t r = 0; r < m.rows; ++r)
      std::memcpy(out.data.data() + static_cast<std::size_t>(r) * take, m.row(r) + skip, take);
    return out;
  }
  std::vector<float> row(static_cast<std::size_t>(m.cols));
  out.data.resize(static_cast<std::size_t>(m.rows * count) * sizeof(float));
  auto* dst = reinterpret_cast<float*>(out.data.data());
  for (std::int64_t r = 0; r < m.rows; ++r) {
    m.dequantize_row(r, row);
    std::memcpy(dst + r * count, row.data() + begin, static_cast<std::size_t>(count) * sizeof(float));
  }
  return out;
}

}  // namespace actorlm::kernels::cpu
