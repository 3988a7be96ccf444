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

}  // namespace actorlm::kernels::cuda
