#pragma once
// reshape_and_cache: a step's new K and V rows written into their paged slots, the cuda side of
// kernels/cpu/model/paged_attention.hpp's write_kv (the reference). The slots come from the
// block manager's block tables (slot of position p: table[p / block_size] * block_size +
// p % block_size, cuda_math::paged_slot); a negative slot is a padding row and writes nothing.
// One layer's planes, laid out as the cpu cache's: [num_blocks, kv_heads, block_size, head_dim].

#include "kernels/cuda/elementwise.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace actorlm::kernels::cuda {

struct KvWriteParams {
  const void* k = nullptr;             // [tokens, row_stride] of act_dtype: kv_heads heads of head_dim
  const void* v = nullptr;             // [tokens, row_stride] of act_dtype
  const std::int64_t* slots = nullptr; // [tokens]
  void* k_plane = nullptr;             // [num_blocks, kv_heads, block_size, head_dim] of cache_dtype
  void* v_plane = nullptr;             // the same
  std::int64_t tokens = 0, row_stride = 0;
  std::int32_t kv_heads = 0, head_dim = 0;
  std::uint32_t block_size = 0, num_blocks = 0;
  ActDtype act_dtype = ActDtype::f32;
  ActDtype cache_dtype = ActDtype::f16;  // f32, f16 (the cpu cache's two) or bf16
  std::uint32_t* rejected = nullptr;   // optional device counter: += rows whose slot is past the cache
};

// A slot past the cache (>= num_blocks * block_size) writes nothing and counts in `rejected`:
// a wrong slot mapping never writes outside the planes, and the shard can tell.
void reshape_and_cache(const KvWriteParams&, cudaStream_t stream);

// The forward's rotary embedding, query extraction and KV write in one launch. Per token row:
// the query heads of q_in (rows of kv.row_stride elements, as the QKV GEMM leaves them) rotated
// into q_out ([tokens, q_heads, head_dim], contiguous, as the attention kernels read them); the
// K heads of kv.k rotated and written with kv.v's into their paged slots. The values of
// apply_rope over the query and K heads, a copy of the query heads and reshape_and_cache (the
// rotated K rounded to kv.act_dtype before the cache's dtype), bit for bit; nothing is written
// back to q_in or kv.k. Padding rows (a negative slot) and slots past the cache still get their
// query rows; their K and V are dropped as reshape_and_cache drops them.
struct RopeCacheParams {
  KvWriteParams kv;                         // tokens, K and V sources, slots, planes, shapes, dtypes
  const void* q_in = nullptr;               // [tokens, kv.row_stride] of kv.act_dtype: q_heads heads first
  void* q_out = nullptr;                    // [tokens, q_heads * head_dim] of kv.act_dtype
  const std::int32_t* positions = nullptr;  // [tokens]
  const float* inv_freq = nullptr;          // [head_dim / 2]: rope_inv_freq_table's
  std::int32_t q_heads = 0;
  float linear_factor = 1.0f;
  bool halves = true;                       // model::RopeStyle::halves; false: adjacent pairs
};
void rope_and_cache(const RopeCacheParams&, cudaStream_t stream);

}  // namespace actorlm::kernels::cuda
