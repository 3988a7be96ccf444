#pragma once
// What the GPU benchmarks under tools/gpu share: deterministic non-zero inputs, event-timed
// medians, and the exit code 77 (skipped) without a device.
#include "kernels/cuda/cuda_check.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace actorlm::tools::gpu {

namespace detail {
__global__ inline void fill_kernel(__nv_bfloat16* p, std::size_t n, std::uint32_t seed, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint32_t x = std::uint32_t(i) * 2654435761u ^ seed ^ std::uint32_t(i >> 32) * 40503u;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    // Uniform in [-scale, scale), moved off zero: zeros can run faster than real data.
    p[i] = __float2bfloat16_rn((float(x >> 8) / float(1 << 23) - 1.0f + 1.0f / float(1 << 24)) * scale);
  }
}
}  // namespace detail

// n bf16 values of a hash of (index, seed), uniform in [-scale, scale), never zero.
inline void fill_bf16(void* p, std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  detail::fill_kernel<<<2048, 256>>>(static_cast<__nv_bfloat16*>(p), n, seed, scale);
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

// The median of `reps` timings (CUDA events on the default stream) of launch(i), after three
// untimed launches.
template <class F>
float median_ms(int reps, F&& launch) {
  cudaEvent_t a, b;
  ACTORLM_CUDA_CHECK(cudaEventCreate(&a));
  ACTORLM_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch(i);
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    ACTORLM_CUDA_CHECK(cudaEventRecord(a));
    launch(i);
    ACTORLM_CUDA_CHECK(cudaEventRecord(b));
    ACTORLM_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    ACTORLM_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// False, having said so, when no CUDA device is visible (the caller then exits 77: skipped).
inline bool device_present() {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return true;
  std::puts("no CUDA device: skipped");
  return false;
}

// The flags every GPU benchmark takes: --json FILE, --reps N. False, having printed the usage,
// for anything else.
struct BenchArgs {
  std::string json;
  int reps = 20;
};

inline bool parse_bench_args(int argc, char** argv, const char* name, BenchArgs& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) args.json = argv[++i];
    else if (a == "--reps" && i + 1 < argc) args.reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--reps N]\n", name);
      return false;
    }
  }
  return true;
}

}  // namespace actorlm::tools::gpu
