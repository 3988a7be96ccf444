#include "tools/gpu/sample_bench_host.hpp"

#include "kernels/cpu/sampling.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace actorlm::tools::gpu {

double cpu_sample_ms(const float* logits, std::int64_t rows, std::int64_t vocab, int reps) {
  namespace cpu = actorlm::kernels::cpu;
  cpu::SamplerParams p;
  p.temperature = 0.8f;
  p.top_k = 50;
  p.top_p = 0.9f;
  std::vector<double> ms;
  for (int rep = 0; rep < std::max(3, reps); ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t r = 0; r < rows; ++r)
      (void)cpu::sample({logits + r * vocab, static_cast<std::size_t>(vocab)}, p, static_cast<std::uint64_t>(r),
                        static_cast<std::uint64_t>(rep));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace actorlm::tools::gpu
