#pragma once
// The layout in which the integer kernels (quant_dot.hpp) read Q8_0, Q4_0 and Q4_1 weights:
// rows in groups of 16, so that one 512-bit register holds one pair of values of 16 weight rows
// and an output row's 16 sums accumulate in the 16 lanes of one register (no horizontal sums,
// one scale vector per block for all 16 rows).
//
// A grouped matrix is group-major, and a group's blocks are in order; block b of group g, for
// its rows l = 0..15 (row 16g + l; rows past the matrix's end are zero), is
//   [16 f16 scales d_l][16 f16 minimums m_l: Q4_1 only][codes]
// codes, in units of 32 bytes, byte 2l + t of a unit for row l:
//   Q8_0:        16 units; unit p holds value 2p + t (int8);
//   Q4_0, Q4_1:   8 units; unit u holds value 2u + t in its low nibble and 2u + 16 + t in its
//                high one (the file's nibble codes, unchanged).
// Widened to 16 bits, a unit is for 16 rows at once the value pairs that meet one 32-bit pair of
// activations. A block of 16 rows takes 16 times the file's block bytes: the same size as the
// file's layout but for the padding rows of a last group.

#include "kernels/cpu/model/weight_matrix.hpp"

#include <cstddef>
#include <cstdint>

namespace actorlm::kernels::cpu {

constexpr std::int64_t row_group = 16;

// Bytes of one file block of `t` (34, 18, 20); 0 for the other types.
std::size_t file_block_bytes(model::DType t);
// Bytes of one block of a group of 16 rows, and where its codes start.
inline std::size_t group_block_bytes(model::DType t) { return file_block_bytes(t) * row_group; }
inline std::size_t group_codes_offset(model::DType t) { return t == model::DType::q4_1 ? 64 : 32; }

// `m` (Q8_0, Q4_0 or Q4_1 in the file's row layout) in the grouped layout; other types and
// matrices already grouped are left as they are.
void group_rows(WeightMatrix& m);

// out[file_block_bytes] = block b of row r of a grouped matrix, as the file stored it.
void ungroup_block(const WeightMatrix& m, std::int64_t r, std::int64_t b, std::byte* out);

}  // namespace actorlm::kernels::cpu
