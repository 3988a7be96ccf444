// Sampling on the GPU (kernels/cuda/greedy_sample.hpp, draw_sample.hpp) against what the host
// path pays for the same rows: f32 logits of a 49,152 (SmolLM2) and a 128,256 (Llama 3) token
// vocabulary, 1, 64 and 256 rows (decode steps). Per case, medians of: the argmax kernel; draws
// at temperature 0.8 alone, with top-k 50 and top-p 0.9, and with top-p 0.95 and min-p 0.05; and
// the host path's parts: copying the rows back to pinned memory, and the cpu sampler drawing them
// (one thread, as the cuda sampler draws its host rows).
//
//   sample_bench [--json FILE] [--reps N]
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/draw_sample.hpp"
#include "kernels/cuda/greedy_sample.hpp"
#include "tools/gpu/bench_support.cuh"
#include "tools/gpu/sample_bench_host.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpu = actorlm::kernels::cuda;

namespace {

// Logits of a hash of the index: a sum of four uniforms (roughly normal, sd ~3), as a model's
// rows are mostly a broad low mass with a few high tokens.
__global__ void fill_logits(float* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    float s = 0;
    std::uint32_t x = std::uint32_t(i) * 2654435761u ^ 0x9e3779b9u;
    for (int k = 0; k < 4; ++k) {
      x ^= x >> 15, x *= 2246822519u, x ^= x >> 13, x *= 3266489917u, x ^= x >> 16;
      s += float(x >> 8) / float(1 << 24);
    }
    p[i] = (s - 2.0f) * 5.2f;
  }
}

struct Filters {
  const char* name;
  std::int32_t top_k;
  float top_p, min_p;
};

const Filters filters[] = {{"draw_ms", 0, 1.0f, 0.0f}, {"draw_topk50_topp09_ms", 50, 0.9f, 0.0f},
                           {"draw_topp095_minp005_ms", 0, 0.95f, 0.05f}};

struct Case {
  std::int64_t vocab, rows;
  float greedy_ms = 0, draw_ms[3] = {}, copy_back_ms = 0;
  double host_sample_ms = 0;
};

}  // namespace

int main(int argc, char** argv) try {
  actorlm::tools::gpu::BenchArgs args;
  if (!actorlm::tools::gpu::parse_bench_args(argc, argv, "sample_bench", args)) return 2;
  const std::string& json = args.json;
  const int reps = args.reps;
  if (!actorlm::tools::gpu::device_present()) return 77;
  std::vector<Case> cases;
  for (std::int64_t vocab : {std::int64_t{49152}, std::int64_t{128256}})
    for (std::int64_t rows : {std::int64_t{1}, std::int64_t{64}, std::int64_t{256}}) cases.push_back({vocab, rows});
  for (Case& c : cases) {
    const std::size_t n = std::size_t(c.vocab * c.rows);
    float *logits = nullptr, *logprob = nullptr, *host = nullptr;
    std::int32_t *top_n = nullptr, *token = nullptr;
    gpu::TokenLogprobPair* top = nullptr;
    gpu::DrawJob* jobs = nullptr;
    ACTORLM_CUDA_CHECK(cudaMalloc(&logits, n * 4));
    ACTORLM_CUDA_CHECK(cudaMalloc(&logprob, std::size_t(c.rows) * 4));
    ACTORLM_CUDA_CHECK(cudaMalloc(&token, std::size_t(c.rows) * 4));
    ACTORLM_CUDA_CHECK(cudaMalloc(&top_n, std::size_t(c.rows) * 4));
    ACTORLM_CUDA_CHECK(cudaMalloc(&top, std::size_t(c.rows) * sizeof(gpu::TokenLogprobPair)));
    ACTORLM_CUDA_CHECK(cudaMalloc(&jobs, std::size_t(c.rows) * sizeof(gpu::DrawJob)));
    ACTORLM_CUDA_CHECK(cudaMallocHost(&host, n * 4));
    ACTORLM_CUDA_CHECK(cudaMemset(top_n, 0, std::size_t(c.rows) * 4));
    fill_logits<<<2048, 256>>>(logits, n);
    ACTORLM_CUDA_CHECK(cudaGetLastError());
    c.greedy_ms = actorlm::tools::gpu::median_ms(reps, [&](int) {
      gpu::greedy_sample({logits, top_n, token, logprob, top, c.rows, c.vocab, 1}, nullptr);
    });
    for (int f = 0; f < 3; ++f) {
      std::vector<gpu::DrawJob> host_jobs;
      for (std::int64_t r = 0; r < c.rows; ++r)
        host_jobs.push_back({(double(r) + 0.5) / double(c.rows), std::int32_t(r), 0.8f, filters[f].top_k,
                             filters[f].top_p, filters[f].min_p, 0});
      ACTORLM_CUDA_CHECK(cudaMemcpy(jobs, host_jobs.data(), host_jobs.size() * sizeof(gpu::DrawJob), cudaMemcpyHostToDevice));
      c.draw_ms[f] = actorlm::tools::gpu::median_ms(reps, [&](int) {
        gpu::draw_sample({logits, jobs, token, logprob, c.rows, c.vocab}, nullptr);
      });
    }
    c.copy_back_ms = actorlm::tools::gpu::median_ms(reps, [&](int) {
      ACTORLM_CUDA_CHECK(cudaMemcpyAsync(host, logits, n * 4, cudaMemcpyDeviceToHost, nullptr));
    });
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
    c.host_sample_ms = actorlm::tools::gpu::cpu_sample_ms(host, c.rows, c.vocab, std::max(3, reps / 4));
    cudaFree(logits), cudaFree(logprob), cudaFree(token), cudaFree(top_n), cudaFree(top), cudaFree(jobs);
    cudaFreeHost(host);
  }
  std::printf("%7s %5s %10s %10s %12s %12s %12s %14s\n", "vocab", "rows", "argmax ms", "draw ms", "k50,p0.9 ms",
              "p.95,m.05 ms", "copy back ms", "host k50,p0.9");
  FILE* f = json.empty() ? nullptr : std::fopen(json.c_str(), "w");
  if (f) std::fprintf(f, "{\"cases\": [");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::printf("%7lld %5lld %10.4f %10.4f %12.4f %12.4f %12.4f %14.3f\n", (long long)c.vocab, (long long)c.rows,
                c.greedy_ms, c.draw_ms[0], c.draw_ms[1], c.draw_ms[2], c.copy_back_ms, c.host_sample_ms);
    if (f) {
      std::fprintf(f, "%s\n  {\"vocab\": %lld, \"rows\": %lld, \"greedy_ms\": %.5f", i ? "," : "", (long long)c.vocab,
                   (long long)c.rows, c.greedy_ms);
      for (int k = 0; k < 3; ++k) std::fprintf(f, ", \"%s\": %.5f", filters[k].name, c.draw_ms[k]);
      std::fprintf(f, ", \"copy_back_ms\": %.5f, \"host_sample_topk50_topp09_ms\": %.4f}", c.copy_back_ms, c.host_sample_ms);
    }
  }
  if (f) {
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "sample_bench: %s\n", e.what());
  return 1;
}
