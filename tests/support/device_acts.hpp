#pragma once
// Device buffers for the GPU tests: floats stored as elements of an ActDtype (rounded to nearest
// even) and read back widened, and plain arrays. Throws (ACTORLM_CUDA_CHECK) on a CUDA error.
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <ostream>
#include <vector>

namespace actorlm::kernels::cuda {
// Test cases over dtypes print them by name.
inline std::ostream& operator<<(std::ostream& o, ActDtype d) {
  return o << (d == ActDtype::f32 ? "f32" : d == ActDtype::f16 ? "f16" : "bf16");
}
}  // namespace actorlm::kernels::cuda

namespace actorlm::testing {

namespace gpu = actorlm::kernels::cuda;
using ActDtype = gpu::ActDtype;

// Device memory holding floats as elements of `dtype`.
struct DeviceActs {
  ActDtype dtype;
  std::size_t n;
  void* ptr = nullptr;
  DeviceActs(const std::vector<float>& host, ActDtype d) : dtype(d), n(host.size()) {
    ACTORLM_CUDA_CHECK(cudaMalloc(&ptr, n * gpu::act_bytes(d)));
    std::vector<unsigned char> bytes(n * gpu::act_bytes(d));
    for (std::size_t i = 0; i < n; ++i) {
      if (d == ActDtype::f32) std::memcpy(&bytes[4 * i], &host[i], 4);
      if (d == ActDtype::f16) { const __half h = __float2half_rn(host[i]); std::memcpy(&bytes[2 * i], &h, 2); }
      if (d == ActDtype::bf16) { const __nv_bfloat16 h = __float2bfloat16_rn(host[i]); std::memcpy(&bytes[2 * i], &h, 2); }
    }
    ACTORLM_CUDA_CHECK(cudaMemcpy(ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  DeviceActs(const DeviceActs&) = delete;
  DeviceActs& operator=(const DeviceActs&) = delete;
  ~DeviceActs() { cudaFree(ptr); }
  std::vector<float> read() const {
    std::vector<unsigned char> bytes(n * gpu::act_bytes(dtype));
    ACTORLM_CUDA_CHECK(cudaMemcpy(bytes.data(), ptr, bytes.size(), cudaMemcpyDeviceToHost));
    std::vector<float> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (dtype == ActDtype::f32) std::memcpy(&out[i], &bytes[4 * i], 4);
      if (dtype == ActDtype::f16) { __half h; std::memcpy(&h, &bytes[2 * i], 2); out[i] = __half2float(h); }
      if (dtype == ActDtype::bf16) { __nv_bfloat16 h; std::memcpy(&h, &bytes[2 * i], 2); out[i] = __bfloat162float(h); }
    }
    return out;
  }
};

template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  explicit DeviceArray(const std::vector<T>& host) {
    ACTORLM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr), host.size() * sizeof(T)));
    ACTORLM_CUDA_CHECK(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr); }
  std::vector<T> read(std::size_t n) const {
    std::vector<T> out(n);
    ACTORLM_CUDA_CHECK(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }
};

// The host values as the device holds them.
inline std::vector<float> rounded(const std::vector<float>& x, ActDtype d) { return DeviceActs(x, d).read(); }

}  // namespace actorlm::testing
