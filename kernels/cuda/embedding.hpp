#pragma once
// Embedding gather: out[t] = table[ids[t] - first], the first operator of the forward, table and
// activations in f32, f16 or bf16 (the table as uploaded: safetensors as stored, GGUF
// quantized tensors dequantized at load). An id outside [first, first + vocab) gives a row of
// zeros and is counted in `rejected`: a bad id (the shard checks ids on the host first; this
// keeps one from reading outside the table), or, where a tensor-parallel rank holds the rows
// [first, first + vocab) of the vocabulary, another rank's row (the ranks' outputs summed give
// every row).

#include "kernels/cuda/elementwise.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace actorlm::kernels::cuda {

struct EmbeddingParams {
  const void* table = nullptr;          // [vocab, hidden] of table_dtype
  const std::int32_t* ids = nullptr;    // [tokens]
  void* out = nullptr;                  // [tokens, hidden] of out_dtype
  std::int64_t tokens = 0, vocab = 0, hidden = 0;  // vocab: the table's rows
  ActDtype table_dtype = ActDtype::f16;
  ActDtype out_dtype = ActDtype::f16;
  std::uint32_t* rejected = nullptr;    // optional device counter: += ids outside the table
  std::int64_t first = 0;               // the id of the table's first row
};
void embedding(const EmbeddingParams&, cudaStream_t stream);

}  // namespace actorlm::kernels::cuda
