#pragma once
// Matrix products of the cuda backend through cuBLAS: out = act · weightᵀ, the layout of a linear
// layer whose weight is stored [out_features, in_features] as safetensors and GGUF store it. f16
// and bf16 operands multiply on the tensor cores with f32 accumulation; f32 operands in plain
// f32 (no TF32), for checks against the cpu backend. The cuBLAS handle, its workspace and its
// stream belong to one Blas object, one per shard (a handle is not shared across threads).

#include "kernels/cuda/elementwise.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

struct cublasContext;

namespace actorlm::kernels::cuda {

// out[m, n] = alpha · act[m, k] · weight[n, k]ᵀ + beta · out[m, n]; all row-major.
struct GemmParams {
  const void* act = nullptr;     // [m, k] of in_dtype
  const void* weight = nullptr;  // [n, k] of in_dtype
  void* out = nullptr;           // [m, n] of out_dtype
  std::int64_t m = 0, n = 0, k = 0;
  ActDtype in_dtype = ActDtype::bf16;
  ActDtype out_dtype = ActDtype::bf16;  // in_dtype or f32
  float alpha = 1.0f, beta = 0.0f;
  std::int64_t out_stride = 0;  // elements from one row of out to the next (0: n); >= n
};

class Blas {
 public:
  // A cuBLAS handle on `stream` (nullptr: the legacy default stream). Throws std::runtime_error
  // naming the cuBLAS status when the library cannot start (no device, no libcublas).
  explicit Blas(cudaStream_t stream);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // Enqueues the product on the stream. Throws std::invalid_argument for shapes or dtypes it
  // cannot run (out_dtype neither in_dtype nor f32, a dimension <= 0 or past 2^31 - 1), and
  // std::runtime_error with the cuBLAS status when the call fails.
  void gemm(const GemmParams&);

 private:
  cublasContext* handle_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace actorlm::kernels::cuda
