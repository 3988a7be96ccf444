// The cuBLAS calls actorlm makes (kernels/cuda/gemm.cu), on the host for tools/cuda_emu, with the
// declarations of the toolkit's cublas_v2.h: cublasGemmEx as cuBLAS documents it (column-major,
// op(A) m × k, op(B) k × n, C = alpha op(A) op(B) + beta C, C not read when beta is 0), f32
// accumulation, the leading dimensions and types checked as cuBLAS checks them, and every
// matrix's extent checked against the device's allocations (cuBLAS would fault on it).
#include "tools/cuda_emu/host.hpp"

#include <cublas_v2.h>

#include <algorithm>
#include <optional>
#include <vector>

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

using actorlm::kernels::cuda::ActDtype;
using cuda_emu::load;
using cuda_emu::store;

// The element type of a cuBLAS data type this emulation takes (f32, f16, bf16).
std::optional<ActDtype> element_type(cudaDataType t) {
  switch (t) {
    case CUDA_R_32F: return ActDtype::f32;
    case CUDA_R_16F: return ActDtype::f16;
    case CUDA_R_16BF: return ActDtype::bf16;
    default: return std::nullopt;
  }
}

// A column-major rows × cols matrix with leading dimension ld lies in ld (cols - 1) + rows elements.
bool on_device(const void* p, int rows, int cols, int ld, std::size_t bytes) {
  if (rows == 0 || cols == 0) return true;
  return cuda_emu::device_range(p, (std::size_t(ld) * (cols - 1) + rows) * bytes);
}

// Column-major storage: element (r, c) of op(X) is X[r + c ld], or X[c + r ld] when transposed.
// Rows [first, first + rows) of op(X) (its columns `cols`) as row-major floats in out[rows, cols].
void rows_of(const void* x, ActDtype t, bool trans, int ld, int first, int rows, int cols, float* out,
             std::vector<float>& scratch) {
  if (trans) {  // op(X)'s rows are X's columns: contiguous
    for (int r = 0; r < rows; ++r)
      cuda_emu::load_floats(x, t, std::size_t(first + r) * ld, cols, out + std::size_t(r) * cols);
    return;
  }
  scratch.resize(rows);
  for (int c = 0; c < cols; ++c) {
    cuda_emu::load_floats(x, t, std::size_t(first) + std::size_t(c) * ld, rows, scratch.data());
    for (int r = 0; r < rows; ++r) out[std::size_t(r) * cols + c] = scratch[r];
  }
}

// Eight running sums, which the compiler vectorises.
float dot(const float* x, const float* y, int k) {
  float s[8] = {};
  int l = 0;
  for (; l + 8 <= k; l += 8)
    for (int u = 0; u < 8; ++u) s[u] += x[l + u] * y[l + u];
  float acc = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; l < k; ++l) acc += x[l] * y[l];
  return acc;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && !cuda_emu::device_range(workspace, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  if (m < 0 || n < 0 || k < 0 || lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) ||
      ldc < std::max(1, m) || alpha == nullptr || beta == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  const auto at = element_type(Atype), ct = element_type(Ctype);
  if (Atype != Btype || !at || !ct || (Ctype != Atype && Ctype != CUDA_R_32F) ||
      (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const std::size_t ab = actorlm::kernels::cuda::act_bytes(*at), cb = actorlm::kernels::cuda::act_bytes(*ct);
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if (!on_device(A, ta ? k : m, ta ? m : k, lda, ab) || !on_device(B, tb ? n : k, tb ? k : n, ldb, ab) ||
      !on_device(C, m, n, ldc, cb))
    return CUBLAS_STATUS_INVALID_VALUE;  // cuBLAS would read or write past an allocation
  // alpha and beta are read now (host pointer mode), the matrices when the product runs.
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  const auto av = *at, cv = *ct;
  const auto run = [=] {
    cuda_emu::count(cuda_emu::Counted::gemm);
    // op(B)'s n columns as rows of k floats; op(A) a chunk of rows at a time (about 256 KiB of
    // floats: a whole weight widened at once cost page faults and a pass through memory), each
    // element of the product one dot() (cuBLAS's order of summation is its own too). Then alpha,
    // beta and the rounding to C's type as cuBLAS applies them.
    std::vector<float> bt(std::size_t(n) * k), scratch;
    if (k > 0) rows_of(B, av, !tb, ldb, 0, n, k, bt.data(), scratch);  // k = 0: C = beta C, nothing read
    const int chunk = std::max(1, std::min(m, (1 << 16) / std::max(k, 1)));
    std::vector<float> arows(std::size_t(chunk) * k);
    for (int i0 = 0; i0 < m; i0 += chunk) {
      const int rows = std::min(chunk, m - i0);
      if (k > 0) rows_of(A, av, ta, lda, i0, rows, k, arows.data(), scratch);
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < n; ++j) {
          const float x = dot(arows.data() + std::size_t(r) * k, bt.data() + std::size_t(j) * k, k);
          const std::size_t c = std::size_t(i0 + r) + std::size_t(j) * ldc;
          store(C, cv, c, b == 0.0f ? a * x : a * x + b * load(C, cv, c));
        }
    }
  };
  if (cuda_emu::capturing()) {
    cuda_emu::record(run);
  } else {
    cuda_emu::before_op(handle->stream);
    run();
  }
  return CUBLAS_STATUS_SUCCESS;
}
