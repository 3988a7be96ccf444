#include "kernels/cpu/model/row_groups.hpp"

#include <cstring>
#include <stdexcept>

namespace actorlm::kernels::cpu {

namespace {

using model::DType;

constexpr std::int64_t block_values = 32;

// Byte `t` (0 or 1) of row l's entry in a code unit.
std::size_t lane_byte(std::int64_t l, int t) { return static_cast<std::size_t>(2 * l + t); }

// The file's 4-bit codes (low nibbles values 0..15, high 16..31) start after the scale, and the
// minimum for Q4_1.
std::size_t file_codes_offset(DType t) { return t == DType::q4_1 ? 4 : 2; }

}  // namespace

std::size_t file_block_bytes(DType t) {
  switch (t) {
    case DType::q8_0: return 34;
    case DType::q4_0: return 18;
    case DType::q4_1: return 20;
    default: return 0;
  }
}

void group_rows(WeightMatrix& m) {
  const DType t = m.dtype;
  if (m.grouped || file_block_bytes(t) == 0) return;
  const std::int64_t nb = m.cols / block_values, groups = (m.rows + row_group - 1) / row_group;
  const std::size_t fb = file_block_bytes(t), gb = group_block_bytes(t), codes = group_codes_offset(t);
  std::vector<std::byte> out(gb * static_cast<std::size_t>(groups * nb), std::byte{0});
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t b = 0; b < nb; ++b) {
      std::byte* o = out.data() + static_cast<std::size_t>(g * nb + b) * gb;
      for (std::int64_t l = 0; l < row_group && g * row_group + l < m.rows; ++l) {
        const std::byte* blk = m.row(g * row_group + l) + static_cast<std::size_t>(b) * fb;
        std::memcpy(o + 2 * l, blk, 2);                            // scale
        if (t == DType::q4_1) std::memcpy(o + 32 + 2 * l, blk + 2, 2);  // minimum
        std::byte* c = o + codes;
        if (t == DType::q8_0) {
          for (int u = 0; u < 16; ++u)
            for (int k = 0; k < 2; ++k) c[32 * u + lane_byte(l, k)] = blk[2 + 2 * u + k];
          continue;
        }
        // Unit u's byte holds values 2u + k (low) and 2u + 16 + k (high): in the file, value v < 16
        // is the low nibble of code byte v and value v + 16 its high nibble, so the byte is the
        // file's code byte 2u + k unchanged.
        const std::byte* q = blk + file_codes_offset(t);
        for (int u = 0; u < 8; ++u)
          for (int k = 0; k < 2; ++k) c[32 * u + lane_byte(l, k)] = q[2 * u + k];
      }
    }
  m.data = std::move(out);
  m.grouped = true;
}

void ungroup_block(const WeightMatrix& m, std::int64_t r, std::int64_t b, std::byte* out) {
  const DType t = m.dtype;
  if (!m.grouped || r < 0 || r >= m.rows) throw std::logic_error("ungroup_block: not a grouped matrix's row");
  const std::int64_t nb = m.cols / block_values, g = r / row_group, l = r % row_group;
  const std::byte* o = m.data.data() + static_cast<std::size_t>(g * nb + b) * group_block_bytes(t);
  std::memcpy(out, o + 2 * l, 2);
  if (t == DType::q4_1) std::memcpy(out + 2, o + 32 + 2 * l, 2);
  const std::byte* c = o + group_codes_offset(t);
  if (t == DType::q8_0) {
    for (int u = 0; u < 16; ++u)
      for (int k = 0; k < 2; ++k) out[2 + 2 * u + k] = c[32 * u + lane_byte(l, k)];
    return;
  }
  std::byte* q = out + file_codes_offset(t);
  for (int u = 0; u < 8; ++u)
    for (int k = 0; k < 2; ++k) q[2 * u + k] = c[32 * u + lane_byte(l, k)];
}

}  // namespace actorlm::kernels::cpu
