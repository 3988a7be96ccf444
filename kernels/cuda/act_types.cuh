#pragma once
// Device-side element types of ActDtype (kernels/cuda/elementwise.hpp): loads widen to float,
// stores round to nearest even; with_type picks the C++ type of a dtype for a launch. For .cu
// files only.

#include "kernels/cuda/elementwise.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace actorlm::kernels::cuda {

__device__ inline float load(const float* p, std::int64_t i) { return p[i]; }
__device__ inline float load(const __half* p, std::int64_t i) { return __half2float(p[i]); }
__device__ inline float load(const __nv_bfloat16* p, std::int64_t i) { return __bfloat162float(p[i]); }
__device__ inline void store(float* p, std::int64_t i, float v) { p[i] = v; }
__device__ inline void store(__half* p, std::int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ inline void store(__nv_bfloat16* p, std::int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// f(T*) (a null pointer that only carries the type) with the element type of `d`.
template <class F>
void with_type(ActDtype d, F&& f) {
  switch (d) {
    case ActDtype::f32: return f(static_cast<float*>(nullptr));
    case ActDtype::f16: return f(static_cast<__half*>(nullptr));
    case ActDtype::bf16: return f(static_cast<__nv_bfloat16*>(nullptr));
  }
  throw std::invalid_argument("cuda kernels: unknown dtype");
}

// f(A*, B*) with the element types of `a` and `b` (a kernel that converts between two dtypes).
template <class F>
void with_types(ActDtype a, ActDtype b, F&& f) {
  with_type(a, [&](auto* x) { with_type(b, [&](auto* y) { f(x, y); }); });
}

// A launcher's argument check: std::invalid_argument("cuda kernels: " + what) when !ok.
inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("cuda kernels: " + what);
}

template <class Tag>
using ElementOf = std::remove_pointer_t<Tag>;

}  // namespace actorlm::kernels::cuda
