#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/elementwise_math.hpp"

#include <stdexcept>
#include <string>

namespace actorlm::kernels::cuda {

namespace {

namespace m = cuda_math;

constexpr int threads_per_block = 256;  // a multiple of the warp size (block_sum)

// The row a norm reads: x's, or with a residual stream the residual's after x is added to it
// (each thread adds the elements it reads back later, so no barrier is needed).
template <class T>
__device__ const T* norm_input(const T* x, T* residual, std::int64_t n) {
  const T* xr = x + blockIdx.x * n;
  if (residual == nullptr) return xr;
  T* r = residual + blockIdx.x * n;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) store(r, i, load(r, i) + load(xr, i));
  return r;
}

// grid: rows; one thread block per row.
template <class T>
__global__ void rms_norm_kernel(const T* x, T* residual, const float* w, T* out, std::int64_t n, float eps) {
  __shared__ float shared[32];
  const T* xr = norm_input(x, residual, n);
  T* o = out + blockIdx.x * n;
  float ss = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = load(xr, i);
    ss += v * v;
  }
  const float inv = m::rms_scale(block_sum(ss, shared) / float(n), eps);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) store(o, i, load(xr, i) * inv * w[i]);
}

template <class T>
__global__ void layer_norm_kernel(const T* x, T* residual, const float* w, const float* b, T* out, std::int64_t n,
                                  float eps) {
  __shared__ float shared[32];
  const T* xr = norm_input(x, residual, n);
  T* o = out + blockIdx.x * n;
  float s = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += load(xr, i);
  const float mean = block_sum(s, shared) / float(n);
  float var = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float d = load(xr, i) - mean;
    var += d * d;
  }
  const float inv = m::layer_scale(block_sum(var, shared) / float(n), eps);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) store(o, i, (load(xr, i) - mean) * inv * w[i] + b[i]);
}

// One thread per (row, head, pair).
template <class T>
__global__ void rope_kernel(RopeParams p) {
  const std::int32_t half = p.head_dim / 2;
  const std::int64_t k = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= p.rows * p.heads * half) return;
  const auto i = static_cast<std::int32_t>(k % half);
  const auto h = static_cast<std::int32_t>(k / half % p.heads);
  const std::int64_t r = k / half / p.heads;
  T* v = static_cast<T*>(p.x) + r * p.row_stride + std::int64_t(h) * p.head_dim;
  const m::RopePair pair = m::rope_pair(p.halves, half, i);
  const float angle = m::rope_angle(p.positions[r], p.linear_factor, p.inv_freq[i]);
  float x0 = load(v, pair.a), x1 = load(v, pair.b);
  m::rope_rotate(x0, x1, cosf(angle), sinf(angle));
  store(v, pair.a, x0);
  store(v, pair.b, x1);
}

template <class T>
__global__ void silu_mul_kernel(const T* gate_up, T* out, std::int64_t rows, std::int64_t f) {
  for (std::int64_t k = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < rows * f;
       k += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = k / f, c = k % f;
    const T* g = gate_up + r * 2 * f;
    store(out, k, m::silu_mul(load(g, c), load(g, f + c)));
  }
}

// y[i] += x[i] (the residual stream), arithmetic in f32.
template <class T>
__global__ void add_kernel(T* y, const T* x, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    store(y, i, load(y, i) + load(x, i));
}

// out[i] = in[i], converted (rounded to nearest even when narrowing).
template <class A, class B>
__global__ void convert_kernel(const A* in, B* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    store(out, i, load(in, i));
}

template <class T>
__global__ void gelu_kernel(T* x, std::int64_t n) {
  for (std::int64_t k = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += std::int64_t(gridDim.x) * blockDim.x)
    store(x, k, m::gelu(load(x, k)));
}

// Blocks of a grid-stride launch over n elements (a few waves of a large GPU at most).
unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

}  // namespace

void rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  require(p.x && p.weight && p.out && p.n > 0, "rms_norm: null pointer or empty row");
  require(p.out != p.residual && p.x != p.residual, "rms_norm: out or x aliases the residual stream");
  with_type(p.dtype, [&](auto* tag) {
    using T = ElementOf<decltype(tag)>;
    rms_norm_kernel<T><<<static_cast<unsigned>(p.rows), threads_per_block, 0, stream>>>(
        static_cast<const T*>(p.x), static_cast<T*>(p.residual), p.weight, static_cast<T*>(p.out), p.n, p.eps);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void layer_norm(const LayerNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  require(p.x && p.weight && p.bias && p.out && p.n > 0, "layer_norm: null pointer or empty row");
  require(p.out != p.residual && p.x != p.residual, "layer_norm: out or x aliases the residual stream");
  with_type(p.dtype, [&](auto* tag) {
    using T = ElementOf<decltype(tag)>;
    layer_norm_kernel<T><<<static_cast<unsigned>(p.rows), threads_per_block, 0, stream>>>(
        static_cast<const T*>(p.x), static_cast<T*>(p.residual), p.weight, p.bias, static_cast<T*>(p.out), p.n,
        p.eps);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void rope_inv_freq_table(float theta, std::int32_t head_dim, float* out_host) {
  for (std::int32_t i = 0; i < head_dim / 2; ++i) out_host[i] = m::rope_inv_freq(theta, head_dim, i);
}

void apply_rope(const RopeParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return;
  require(p.x && p.positions && p.inv_freq, "apply_rope: null pointer");
  require(p.head_dim > 0 && p.head_dim % 2 == 0, "apply_rope: head_dim must be even and positive");
  require(p.row_stride >= std::int64_t(p.heads) * p.head_dim, "apply_rope: row_stride shorter than the heads");
  const std::int64_t n = p.rows * p.heads * (p.head_dim / 2);
  with_type(p.dtype, [&](auto* tag) {
    using T = ElementOf<decltype(tag)>;
    rope_kernel<T><<<static_cast<unsigned>((n + threads_per_block - 1) / threads_per_block), threads_per_block, 0, stream>>>(p);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void silu_mul(const SiluMulParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.f == 0) return;
  require(p.gate_up && p.out, "silu_mul: null pointer");
  with_type(p.dtype, [&](auto* tag) {
    using T = ElementOf<decltype(tag)>;
    silu_mul_kernel<T><<<grid_for(p.rows * p.f), threads_per_block, 0, stream>>>(
        static_cast<const T*>(p.gate_up), static_cast<T*>(p.out), p.rows, p.f);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void gelu(void* x, std::int64_t n, ActDtype dtype, cudaStream_t stream) {
  if (n == 0) return;
  require(x != nullptr, "gelu: null pointer");
  with_type(dtype, [&](auto* tag) {
    using T = ElementOf<decltype(tag)>;
    gelu_kernel<T><<<grid_for(n), threads_per_block, 0, stream>>>(static_cast<T*>(x), n);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void add_in_place(void* y, const void* x, std::int64_t n, ActDtype dtype, cudaStream_t stream) {
  if (n == 0) return;
  require(y && x, "add_in_place: null pointer");
  with_type(dtype, [&](auto* tag) {
    using T = ElementOf<decltype(tag)>;
    add_kernel<T><<<grid_for(n), threads_per_block, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(x), n);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void convert(const void* in, ActDtype in_dtype, void* out, ActDtype out_dtype, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  require(in && out, "convert: null pointer");
  with_types(in_dtype, out_dtype, [&](auto* a, auto* b) {
    using A = ElementOf<decltype(a)>;
    using B = ElementOf<decltype(b)>;
    convert_kernel<A, B><<<grid_for(n), threads_per_block, 0, stream>>>(static_cast<const A*>(in), static_cast<B*>(out), n);
  });
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace actorlm::kernels::cuda
