#pragma once
// Attention over a paged KV cache, for one sequence at a time: prefill chunks (causal, attending
// to earlier chunks already in the cache) and decode are the same call. A block holds
// `block_size` consecutive positions; position p lives in block block_table[p / block_size],
// slot p % block_size.

#include "kernels/cpu/thread_pool.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace actorlm::kernels::cpu {

// The KV cache's element type: float, or IEEE binary16 (half the bytes; rounded to nearest
// even when written, widened to float exactly when read, see half.hpp).
enum class KvDtype { f32, f16 };
constexpr std::size_t kv_element_bytes(KvDtype d) { return d == KvDtype::f16 ? 2 : 4; }
const char* to_string(KvDtype);

// One layer's K (or V) plane: [num_blocks, kv_heads, block_size, head_dim] elements of `dtype`.
struct KvPlaneView {
  std::byte* data = nullptr;
  std::uint32_t num_blocks = 0;
  std::int32_t kv_heads = 0;
  std::uint32_t block_size = 0;
  std::int32_t head_dim = 0;
  KvDtype dtype = KvDtype::f32;

  std::size_t block_elements() const { return std::size_t(kv_heads) * block_size * head_dim; }
  // [head_dim] of head h at position p of a sequence with this block table; Element is float
  // for an f32 plane, std::uint16_t for an f16 one.
  template <class Element>
  Element* at(std::span<const std::uint32_t> table, std::uint32_t p, std::int32_t h) const {
    return reinterpret_cast<Element*>(data) + std::size_t(table[p / block_size]) * block_elements() +
           (std::size_t(h) * block_size + p % block_size) * head_dim;
  }
};

// Throws std::out_of_range unless `table` covers positions [0, end) with blocks of the plane.
void check_covered(const KvPlaneView& plane, std::span<const std::uint32_t> table, std::uint32_t end);

// Writes rows k, v ([n, kv_heads * head_dim] with a row stride) at positions first .. first+n-1,
// converted to the planes' dtype.
// Throws std::out_of_range when the table does not cover them or names a block out of range.
void write_kv(const KvPlaneView& k_plane, const KvPlaneView& v_plane,
              std::span<const std::uint32_t> table, std::uint32_t first, std::uint32_t n,
              const float* k, const float* v, std::int64_t row_stride);


// q: [n, row_stride] with q_heads heads of head_dim from the start of each row, for positions
// first .. first+n-1. out: [n, q_heads * head_dim]. Query row t attends to positions
// [0, first + t] of the cache (which must already hold them). Query head j reads KV head
// j * kv_heads / q_heads. scale is usually 1/sqrt(head_dim).
// A query row's positions are split into chunks of attention_chunk_positions (rounded down to
// whole blocks, at least one), each chunk's softmax and weighted values computed for all the
// query heads of a KV head at once (a K or V block is read from memory once per group), then the
// chunks merged by their maxima and sums. The chunks are fixed positions, so a row's arithmetic
// is the same whatever n and first are (a chunked prefill gives the same bits as one shot) and
// however the work is spread over `pool` when given.
// An f16 plane is widened to float in registers; the arithmetic is the f32 plane's.
constexpr std::uint32_t attention_chunk_positions = 128;

void paged_attention(const KvPlaneView& k_plane, const KvPlaneView& v_plane,
                     std::span<const std::uint32_t> table, std::uint32_t first, std::uint32_t n,
                     const float* q, std::int64_t row_stride, std::int32_t q_heads, float scale,
                     float* out, ThreadPool* pool = nullptr);

}  // namespace actorlm::kernels::cpu
