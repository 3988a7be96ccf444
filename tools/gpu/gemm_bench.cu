// cuBLAS products (kernels/cuda/gemm.hpp) as the cuda backend will run them, bf16 with f32
// accumulation: a Llama-3.2-1B-shaped MLP projection (weight [8192, 2048]) at the token counts of
// decode steps (1, 64, 256) and of a prefill chunk (4096), and an 8192³ product for the device's
// matrix ceiling. Prints time, TFLOP/s and the bytes moved per second (weight + activations +
// output, each once): decode-sized products are bound by reading the weight.
//
//   gemm_bench [--json FILE] [--reps N]
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/gemm.hpp"
#include "tools/gpu/bench_support.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpu = actorlm::kernels::cuda;

namespace {

struct Case {
  std::int64_t m, n, k;
  float ms;
};

}  // namespace

int main(int argc, char** argv) try {
  actorlm::tools::gpu::BenchArgs args;
  if (!actorlm::tools::gpu::parse_bench_args(argc, argv, "gemm_bench", args)) return 2;
  const std::string& json = args.json;
  const int reps = args.reps;
  if (!actorlm::tools::gpu::device_present()) return 77;
  std::vector<Case> cases = {{1, 8192, 2048, 0}, {64, 8192, 2048, 0}, {256, 8192, 2048, 0}, {4096, 8192, 2048, 0},
                             {8192, 8192, 8192, 0}};
  gpu::Blas blas(nullptr);
  for (Case& c : cases) {
    // Weights rotate over copies totalling >= 256 MiB, so the 50 MB L2 does not hold them.
    const std::size_t wn = std::size_t(c.n * c.k), copies = std::max<std::size_t>(1, (256u << 20) / (wn * 2) + 1);
    __nv_bfloat16 *w = nullptr, *a = nullptr, *o = nullptr;
    ACTORLM_CUDA_CHECK(cudaMalloc(&w, wn * copies * 2));
    ACTORLM_CUDA_CHECK(cudaMalloc(&a, std::size_t(c.m * c.k) * 2));
    ACTORLM_CUDA_CHECK(cudaMalloc(&o, std::size_t(c.m * c.n) * 2));
    actorlm::tools::gpu::fill_bf16(w, wn * copies, 1, 0.1f);
    actorlm::tools::gpu::fill_bf16(a, std::size_t(c.m * c.k), 2, 0.1f);
    c.ms = actorlm::tools::gpu::median_ms(reps, [&](int r) {
      blas.gemm({a, w + wn * (r % copies), o, c.m, c.n, c.k, gpu::ActDtype::bf16, gpu::ActDtype::bf16});
    });
    cudaFree(w), cudaFree(a), cudaFree(o);
  }
  std::printf("%6s %6s %6s %10s %9s %9s\n", "m", "n", "k", "ms", "TFLOP/s", "GB/s");
  FILE* f = json.empty() ? nullptr : std::fopen(json.c_str(), "w");
  if (f) std::fprintf(f, "{\"dtype\": \"bf16\", \"cases\": [");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const double flops = 2.0 * c.m * c.n * c.k, bytes = 2.0 * (c.n * c.k + c.m * c.k + c.m * c.n);
    const double tflops = flops / (c.ms * 1e-3) / 1e12, gbps = bytes / (c.ms * 1e-3) / 1e9;
    std::printf("%6lld %6lld %6lld %10.4f %9.1f %9.0f\n", (long long)c.m, (long long)c.n, (long long)c.k, c.ms, tflops, gbps);
    if (f)
      std::fprintf(f, "%s\n  {\"m\": %lld, \"n\": %lld, \"k\": %lld, \"ms\": %.5f, \"tflops\": %.2f, \"gbps\": %.1f}",
                   i ? "," : "", (long long)c.m, (long long)c.n, (long long)c.k, c.ms, tflops, gbps);
  }
  if (f) {
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gemm_bench: %s\n", e.what());
  return 1;
}
