#pragma once
// The rule behind decode_attention_chunk (kernels/cuda/paged_attention.hpp), in plain C++ so the
// CPU test suite checks it against what an H200 measured (tests/kernels/cuda/decode_chunk_rule_test).
// The launcher supplies each candidate's thread blocks and how many of them the device holds at
// once (its occupancy); the rule needs no GPU.

#include <algorithm>
#include <cstdint>
#include <vector>

namespace actorlm::kernels::cuda {

// One candidate chunk length for a decode attention launch.
struct ChunkFit {
  std::uint32_t chunk = 0;     // positions per chunk
  std::uint64_t blocks = 0;    // thread blocks the launch would have
  std::uint64_t resident = 0;  // of them, how many the device runs at once
};

// The chunk lengths to consider, longest first: powers of two from max_chunk down to
// max(64, block_size), none longer than the context needs (rounded up to that unit), each a
// multiple of block_size (a power of two).
inline std::vector<std::uint32_t> decode_chunk_candidates(std::uint32_t max_context, std::uint32_t block_size,
                                                          std::uint32_t max_chunk) {
  const std::uint32_t unit = std::max<std::uint32_t>(64, block_size);
  const std::uint32_t longest = std::max(unit, (std::max(max_context, 1u) + unit - 1) / unit * unit);
  std::vector<std::uint32_t> out;
  for (std::uint32_t c = max_chunk; c >= unit; c /= 2)
    if (c <= longest && c % block_size == 0) out.push_back(c);
  if (out.empty()) out.push_back(unit);
  return out;
}

// Measured on an H200 (tools/gpu/decode_attention_bench --chunk, chunks 64..2048): a thread block
// costs a fixed part besides its positions (chunks of 128 took 1.7 times as long as 512 at batch
// 64 / 4k), and a last wave that fills few multiprocessors costs a whole block time (2048: 1.3
// waves, slower than 1024: 2.6 waves). So: the longest chunk of at least 512 (or of the whole
// context, when shorter) that leaves two waves; else (small batches) the longest that still gives
// 3 blocks per multiprocessor; else the shortest. `fits`: longest first, not empty.
inline std::uint32_t choose_decode_chunk(const std::vector<ChunkFit>& fits, int multiprocessors) {
  const std::uint32_t long_enough = std::min<std::uint32_t>(512, fits.front().chunk);
  for (const ChunkFit& f : fits)
    if (f.chunk >= long_enough && f.blocks >= 2 * f.resident) return f.chunk;
  for (const ChunkFit& f : fits)
    if (f.blocks >= 3ull * std::uint64_t(std::max(multiprocessors, 1))) return f.chunk;
  return fits.back().chunk;
}

}  // namespace actorlm::kernels::cuda
