// greedy_sample on a GPU against the cpu sampler (greedy): for rows with NaN, +inf, -inf and
// ties, vocabularies from 1 to 128,256 (Llama 3's), the same token, its log-probability within
// 1e-5 + 1e-6 |lp|, and the same top log-probabilities in the same order (token -1 past the
// vocabulary); a row of nothing but -inf and NaN gives token -1. Needs a GPU: without one the
// binary exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_greedy_sample
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/sampling.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/greedy_sample.hpp"
#include "tests/support/gpu_test_main.hpp"
#include "tests/support/logit_rows.hpp"

#include <cmath>

namespace cpu = actorlm::kernels::cpu;
namespace gpu = actorlm::kernels::cuda;

namespace {

template <class T>
struct Device {
  T* ptr = nullptr;
  explicit Device(std::size_t n) {
    ACTORLM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<std::size_t>(n, 1) * sizeof(T)));
  }
  ~Device() { cudaFree(ptr); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(greedy_rows_on_the_gpu_sample_what_the_cpu_sampler_does) {
  std::mt19937_64 rng(5);
  const std::int32_t max_top = 20;
  for (const std::int64_t vocab : {std::int64_t{1}, std::int64_t{7}, std::int64_t{256}, std::int64_t{49152},
                                   std::int64_t{128256}}) {
    const std::int64_t rows = 24;
    std::vector<float> logits;
    std::vector<std::int32_t> top_n(rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      auto row = actorlm::testing::random_logit_row(rng, static_cast<std::size_t>(vocab));
      if (r == rows - 1) std::fill(row.begin(), row.end(), -INFINITY);  // nothing to draw
      if (r == rows - 2) row.assign(row.size(), std::nanf(""));
      logits.insert(logits.end(), row.begin(), row.end());
      top_n[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(rng() % (max_top + 1));
    }
    Device<float> d_logits(logits.size());
    Device<std::int32_t> d_top_n(rows), d_token(rows);
    Device<float> d_logprob(rows);
    Device<gpu::TokenLogprobPair> d_top(std::size_t(rows * max_top));
    ACTORLM_CUDA_CHECK(cudaMemcpy(d_logits.ptr, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
    ACTORLM_CUDA_CHECK(cudaMemcpy(d_top_n.ptr, top_n.data(), top_n.size() * 4, cudaMemcpyHostToDevice));
    gpu::greedy_sample({d_logits.ptr, d_top_n.ptr, d_token.ptr, d_logprob.ptr, d_top.ptr, rows, vocab, max_top}, nullptr);
    std::vector<std::int32_t> token(rows);
    std::vector<float> logprob(rows);
    std::vector<gpu::TokenLogprobPair> top(std::size_t(rows * max_top));
    ACTORLM_CUDA_CHECK(cudaMemcpy(token.data(), d_token.ptr, token.size() * 4, cudaMemcpyDeviceToHost));
    ACTORLM_CUDA_CHECK(cudaMemcpy(logprob.data(), d_logprob.ptr, logprob.size() * 4, cudaMemcpyDeviceToHost));
    ACTORLM_CUDA_CHECK(cudaMemcpy(top.data(), d_top.ptr, top.size() * sizeof(top[0]), cudaMemcpyDeviceToHost));
    for (std::int64_t r = 0; r < rows; ++r) {
      BOOST_TEST_CONTEXT("vocab " << vocab << ", row " << r) {
        const std::span<const float> row(logits.data() + r * vocab, static_cast<std::size_t>(vocab));
        cpu::SamplerParams p;
        p.temperature = 0;
        p.top_logprobs = static_cast<std::uint32_t>(top_n[static_cast<std::size_t>(r)]);
        cpu::Sampled want;
        try {
          want = cpu::sample(row, p, 0, 0);
        } catch (const std::invalid_argument&) {
          BOOST_TEST(token[static_cast<std::size_t>(r)] == -1);  // the cpu refuses the row: so does the GPU
          continue;
        }
        BOOST_TEST(token[static_cast<std::size_t>(r)] == want.token);
        BOOST_TEST(actorlm::testing::logprob_close(logprob[static_cast<std::size_t>(r)], want.logprob));
        std::size_t k = 0;
        for (; k < want.top.size(); ++k) {
          const auto& got = top[static_cast<std::size_t>(r * max_top) + k];
          BOOST_TEST(got.token == want.top[k].token);
          BOOST_TEST(actorlm::testing::logprob_close(got.logprob, want.top[k].logprob));
        }
        for (; k < std::size_t(top_n[static_cast<std::size_t>(r)]); ++k)  // past the vocabulary
          BOOST_TEST(top[static_cast<std::size_t>(r * max_top) + k].token == -1);
      }
    }
  }
}
