#include "kernels/cuda/gemm.hpp"

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.hpp"

#include <cublas_v2.h>

#include <limits>
#include <stdexcept>
#include <string>

namespace actorlm::kernels::cuda {

namespace {

// Every cuBLAS call is checked here: throws with the call, its site and the status's name.
#define ACTORLM_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                              \
    const cublasStatus_t actorlm_st_ = (call);                                                      \
    if (actorlm_st_ != CUBLAS_STATUS_SUCCESS)                                                       \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #call + \
                               ": " + cublasGetStatusName(actorlm_st_));                           \
  } while (0)

// cuBLAS's own recommendation for Hopper is 32 MiB of workspace; smaller GPUs use less of it.
constexpr std::size_t workspace_bytes = 32u << 20;

cudaDataType_t data_type(ActDtype d) {
  switch (d) {
    case ActDtype::f32: return CUDA_R_32F;
    case ActDtype::f16: return CUDA_R_16F;
    case ActDtype::bf16: return CUDA_R_16BF;
  }
  throw std::invalid_argument("gemm: unknown dtype");
}

}  // namespace

Blas::Blas(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  ACTORLM_CUBLAS_CHECK(cublasCreate(&h));
  handle_ = h;
  try {
    ACTORLM_CUBLAS_CHECK(cublasSetStream(h, stream));
    ACTORLM_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes));
    ACTORLM_CUBLAS_CHECK(cublasSetWorkspace(h, workspace_, workspace_bytes));
    // f32 products stay f32: a TF32 default would put the cpu comparison out of reach.
    ACTORLM_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  } catch (...) {
    cudaFree(workspace_);
    cublasDestroy(h);
    throw;
  }
}

Blas::~Blas() {
  cublasDestroy(handle_);
  cudaFree(workspace_);
}

void Blas::gemm(const GemmParams& p) {
  constexpr std::int64_t max_dim = std::numeric_limits<int>::max();
  require(p.act && p.weight && p.out, "gemm: null pointer");
  require(p.m > 0 && p.n > 0 && p.k > 0 && p.m <= max_dim && p.n <= max_dim && p.k <= max_dim,
          "gemm: dimensions must be in [1, 2^31 - 1]: m " + std::to_string(p.m) + ", n " + std::to_string(p.n) +
              ", k " + std::to_string(p.k));
  require(p.out_dtype == p.in_dtype || p.out_dtype == ActDtype::f32, "gemm: out_dtype must be in_dtype or f32");
  const std::int64_t ldc = p.out_stride == 0 ? p.n : p.out_stride;
  require(ldc >= p.n && ldc <= max_dim, "gemm: out_stride " + std::to_string(p.out_stride) + " outside [n, 2^31 - 1], n " +
                                            std::to_string(p.n));
  // Row-major out = act · weightᵀ is column-major outᵀ[n, m] = weight-as-stored (opT) · actᵀ:
  // a row-major [n, k] weight is the column-major [k, n] matrix, a row-major [m, k] act the
  // column-major [k, m] one.
  const int m = int(p.m), n = int(p.n), k = int(p.k);
  ACTORLM_CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &p.alpha, p.weight,
                                    data_type(p.in_dtype), k, p.act, data_type(p.in_dtype), k, &p.beta, p.out,
                                    data_type(p.out_dtype), int(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace actorlm::kernels::cuda
