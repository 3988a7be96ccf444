#pragma once
// Paged decode attention: one query row per sequence (its newest position) over the sequence's
// KV cache through its block table, split-K as flash-decoding does and as the cpu backend's
// kernels/cpu/model/paged_attention.cpp (the reference) does: the visible positions are cut
// into chunks of chunk_positions (whole blocks); pass 1 computes, per (query head, sequence,
// chunk), the chunk's maximum score, its sum of exp(score - max) and its weighted sum of
// values; pass 2 merges a row's chunks (cuda_math::merge_weight). GQA / MQA: query head j reads
// KV head j * kv_heads / q_heads; a thread block serves up to 8 query heads of one KV group, so
// the group's K and V are read once for all of them. head_dim 64 or 128.

#include "kernels/cuda/elementwise.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace actorlm::kernels::cuda {

struct DecodeAttentionParams {
  const void* q = nullptr;                    // [seqs, q_heads * head_dim] of act_dtype
  const void* k_plane = nullptr;              // [num_blocks, kv_heads, block_size, head_dim] of cache_dtype
  const void* v_plane = nullptr;              // the same
  const std::uint32_t* block_tables = nullptr;  // [seqs, max_blocks_per_seq]
  const std::uint32_t* context_lens = nullptr;  // [seqs]: positions to attend, in [1, max_context]
  void* out = nullptr;                        // [seqs, q_heads * head_dim] of act_dtype
  float* workspace = nullptr;                 // decode_attention_workspace_floats(...) floats
  std::int32_t seqs = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  std::uint32_t block_size = 0, max_blocks_per_seq = 0, max_context = 0;
  std::uint32_t chunk_positions = 512;        // a multiple of block_size
  float scale = 1.0f;
  ActDtype act_dtype = ActDtype::f32;
  ActDtype cache_dtype = ActDtype::f16;
};

// Floats of DecodeAttentionParams::workspace: [seqs, q_heads, chunks of max_context, head_dim + 2].
std::size_t decode_attention_workspace_floats(std::int32_t seqs, std::int32_t q_heads, std::int32_t head_dim,
                                              std::uint32_t max_context, std::uint32_t chunk_positions);

// A chunk_positions for a launch of `shape` (its seqs, heads, head_dim, dtypes, block_size and
// max_context; chunk_positions ignored) on the current device: the longest chunk of 512 to 2048
// positions that still leaves two waves of thread blocks; for small batches, the longest that
// gives three blocks per multiprocessor. A multiple of block_size, at least max(64, block_size).
// Size the workspace with it. Queries the device (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
// once per kernel variant and shared-memory size, then remembers the answers.
std::uint32_t decode_attention_chunk(const DecodeAttentionParams& shape);

// Throws std::invalid_argument naming what it cannot run: head_dim other than 64 / 128, query
// heads not a multiple of KV heads, a block size not a power of two, chunk_positions not whole
// blocks or over 2048, max_context past the block tables.
void decode_attention(const DecodeAttentionParams&, cudaStream_t stream);

}  // namespace actorlm::kernels::cuda
