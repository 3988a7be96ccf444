#pragma once
// Prefill attention over the paged KV cache: a step's new rows of several sequences (a whole
// prompt, a chunk of one after earlier chunks, or a prefix-cache hit's remainder) attend causally
// to every position of their sequence up to their own, read through the block table from the
// cache, which must already hold this step's K and V (reshape_and_cache runs first, as in vLLM).
// The cpu backend's paged_attention (kernels/cpu/model/paged_attention.hpp) with n > 1 is the
// reference. Tiled as flash attention is: a thread block takes 16 query rows of one head, walks
// the positions in tiles of 32 held in shared memory, and keeps each row's running maximum, sum
// and weighted values (cuda_math::merge_weight rescales them when the maximum grows). f32
// arithmetic on the CUDA cores: correct first; tensor cores are the next step.

#include "kernels/cuda/elementwise.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace actorlm::kernels::cuda {

struct PrefillAttentionParams {
  const void* q = nullptr;                      // [rows, q_heads * head_dim] of act_dtype: every sequence's new rows, in order
  const void* k_plane = nullptr;                // [num_blocks, kv_heads, block_size, head_dim] of cache_dtype
  const void* v_plane = nullptr;                // the same
  const std::uint32_t* block_tables = nullptr;  // [seqs, max_blocks_per_seq]
  const std::uint32_t* query_starts = nullptr;  // [seqs + 1]: sequence s's rows are query_starts[s] .. query_starts[s + 1] - 1
  const std::uint32_t* context_lens = nullptr;  // [seqs]: positions in the cache after this step; the new rows are the last ones
  void* out = nullptr;                          // [rows, q_heads * head_dim] of act_dtype
  std::int32_t seqs = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  std::uint32_t block_size = 0, max_blocks_per_seq = 0;
  std::uint32_t max_query_len = 0;              // the most new rows of any sequence (sizes the grid)
  float scale = 1.0f;
  ActDtype act_dtype = ActDtype::f32;
  ActDtype cache_dtype = ActDtype::f16;
};

// One launch on `stream`. Throws std::invalid_argument naming what it cannot run: head_dim other
// than 64 / 128, query heads not a multiple of KV heads, a block size 0, a null pointer.
// A sequence's rows must not outnumber its context, and its context must lie inside its block
// table (the caller's contract, as for decode_attention: not checked on the device).
void prefill_attention(const PrefillAttentionParams&, cudaStream_t stream);

}  // namespace actorlm::kernels::cuda
