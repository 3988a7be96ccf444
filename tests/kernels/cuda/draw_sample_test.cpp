// draw_sample and apply_logit_edits on a GPU against the cpu sampler: rows with NaN, +inf, -inf
// and ties, vocabularies from 1 to 128,256 (Llama 3's), each drawn three times under random
// temperature, top-k, top-p and min-p with the cpu sampler's uniform numbers: the same token
// (stated before any run: no mismatch expected, as one needs a number within ~1e-15 of a token's
// boundary; every drawable row is checked), its log-probability within 1e-5 + 1e-6 |lp|; a row of nothing but -inf and NaN gives
// token -1. Random edits applied on the GPU give apply_logit_edit's bits on the host. Needs a
// GPU: without one the binary exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_draw_sample
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/sampling.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/draw_sample.hpp"
#include "tests/support/device_acts.hpp"
#include "tests/support/gpu_test_main.hpp"
#include "tests/support/logit_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cpu = actorlm::kernels::cpu;
namespace gpu = actorlm::kernels::cuda;
namespace m = actorlm::kernels::cuda_math;
using actorlm::testing::DeviceArray;

BOOST_AUTO_TEST_CASE(filtered_draws_on_the_gpu_pick_the_cpu_samplers_tokens) {
  std::mt19937_64 rng(8);
  const float temperatures[] = {0.05f, 0.5f, 1.0f, 1.7f};
  const float top_ps[] = {1.0f, 0.9f, 0.3f};
  const float min_ps[] = {0.0f, 0.05f, 0.5f};
  std::size_t draws_checked = 0, drawable_jobs = 0;
  for (const std::int64_t vocab : {std::int64_t{1}, std::int64_t{7}, std::int64_t{300}, std::int64_t{49152},
                                   std::int64_t{128256}}) {
    const std::int64_t rows = 16;
    std::vector<float> logits;
    for (std::int64_t r = 0; r < rows; ++r) {
      auto row = actorlm::testing::random_logit_row(rng, static_cast<std::size_t>(vocab));
      if (r == rows - 1) std::fill(row.begin(), row.end(), -INFINITY);  // nothing to draw
      logits.insert(logits.end(), row.begin(), row.end());
    }
    struct Want {
      cpu::SamplerParams p;
      std::uint64_t stream, position;
    };
    std::vector<gpu::DrawJob> jobs;
    std::vector<Want> wants;
    for (std::int64_t r = 0; r < rows; ++r)
      for (int k = 0; k < 3; ++k) {
        Want w{{}, rng() % 8, rng() % 5000};
        w.p.temperature = temperatures[rng() % 4];
        w.p.top_p = top_ps[rng() % 3];
        w.p.min_p = min_ps[rng() % 3];
        const std::int32_t top_ks[] = {0, 1, 40, std::int32_t(vocab)};
        w.p.top_k = top_ks[rng() % 4];
        w.p.seed = rng();
        jobs.push_back({cpu::counter_uniform(w.p.seed, w.stream, w.position), std::int32_t(r), w.p.temperature,
                        w.p.top_k, w.p.top_p, w.p.min_p, 0});
        wants.push_back(w);
      }
    const DeviceArray<float> d_logits(logits);
    const DeviceArray<gpu::DrawJob> d_jobs(jobs);
    const DeviceArray<std::int32_t> d_token(std::vector<std::int32_t>(jobs.size(), -2));
    const DeviceArray<float> d_logprob(std::vector<float>(jobs.size()));
    gpu::draw_sample({d_logits.ptr, d_jobs.ptr, d_token.ptr, d_logprob.ptr, std::int64_t(jobs.size()), vocab}, nullptr);
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
    const auto token = d_token.read(jobs.size());
    const auto logprob = d_logprob.read(jobs.size());
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      const std::span<const float> row(logits.data() + jobs[j].row * vocab, static_cast<std::size_t>(vocab));
      BOOST_TEST_CONTEXT("vocab " << vocab << ", draw " << j << ", T " << wants[j].p.temperature << ", top_k "
                                  << wants[j].p.top_k << ", top_p " << wants[j].p.top_p << ", min_p "
                                  << wants[j].p.min_p) {
        // A row with no finite logit (all -inf or NaN: the last row, and often a short one) has
        // nothing to draw: the cpu refuses it, the GPU gives -1.
        const bool drawable = std::any_of(row.begin(), row.end(), [](float x) { return x > -INFINITY; });
        drawable_jobs += drawable;
        if (!drawable) {
          BOOST_TEST(token[j] == -1);
          BOOST_CHECK_THROW(cpu::sample(row, wants[j].p, wants[j].stream, wants[j].position), std::invalid_argument);
          continue;
        }
        const auto want = cpu::sample(row, wants[j].p, wants[j].stream, wants[j].position);
        BOOST_TEST(token[j] == want.token);
        BOOST_TEST(actorlm::testing::logprob_close(logprob[j], want.logprob));
        ++draws_checked;
      }
    }
  }
  BOOST_TEST(draws_checked == drawable_jobs);
  BOOST_TEST(drawable_jobs >= 150u);  // most rows had something to draw
}

BOOST_AUTO_TEST_CASE(tempered_weights_on_the_gpu_are_the_cpu_samplers_bits) {
  std::mt19937_64 rng(10);
  std::normal_distribution<float> normal(0, 20);
  std::size_t checked = 0, nonzero = 0;
  for (const float temperature : {0.013f, 0.7f, 1.0f, 1.9f, 4.5f}) {
    const float max = normal(rng);
    std::vector<float> x(200000);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = i % 97 == 0 ? -INFINITY : i % 89 == 0 ? max : std::min(max, max - std::abs(normal(rng)));
    const DeviceArray<float> d_x(x), d_w(std::vector<float>(x.size()));
    gpu::tempered_weights(d_x.ptr, max, temperature, d_w.ptr, std::int64_t(x.size()), nullptr);
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = d_w.read(x.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float want = cpu::tempered_weight(x[i], max, temperature);
      differ += std::memcmp(&want, &got[i], sizeof want) != 0;
      nonzero += want > 0;
    }
    BOOST_TEST(differ == 0u, differ << " of " << x.size() << " weights differ at T " << temperature);
    checked += x.size();
  }
  BOOST_TEST(nonzero > checked / 2);
}

BOOST_AUTO_TEST_CASE(edits_applied_on_the_gpu_give_the_hosts_bits) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> any(-5.0f, 5.0f);
  const std::int64_t rows = 8, vocab = 5000;
  std::vector<float> logits;
  for (std::int64_t r = 0; r < rows; ++r) {
    auto row = actorlm::testing::random_logit_row(rng, static_cast<std::size_t>(vocab));
    for (int i = 0; i < 200; ++i) row[rng() % row.size()] = -0.0f;  // which an unbiased edit keeps
    logits.insert(logits.end(), row.begin(), row.end());
  }
  std::vector<m::LogitEdit> edits;
  std::vector<std::int64_t> offsets{0};
  auto want = logits;
  for (std::int64_t r = 0; r < rows; ++r) {
    const int n = r == 3 ? 0 : int(rng() % 600);  // row 3 has none
    std::int32_t t = -2;                            // distinct tokens, a few outside the vocabulary
    for (int i = 0; i < n; ++i) {
      t += 1 + std::int32_t(rng() % 12);
      const float repetition[] = {1.0f, 1.3f, 0.8f};
      const std::uint32_t flags =
          (rng() % 2 ? m::LogitEdit::biased : 0u) | (rng() % 8 == 0 ? m::LogitEdit::masked : 0u);
      const m::LogitEdit e{t, flags, any(rng), repetition[rng() % 3], any(rng)};
      edits.push_back(e);
      if (t >= 0 && t < vocab) want[std::size_t(r * vocab + t)] = m::apply_logit_edit(want[std::size_t(r * vocab + t)], e);
    }
    offsets.push_back(std::int64_t(edits.size()));
  }
  const DeviceArray<float> d_logits(logits);
  const DeviceArray<m::LogitEdit> d_edits(edits);
  const DeviceArray<std::int64_t> d_offsets(offsets);
  gpu::apply_logit_edits({d_logits.ptr, d_edits.ptr, d_offsets.ptr, rows, vocab}, nullptr);
  ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = d_logits.read(logits.size());
  // Bit for bit, but any NaN equals any NaN (the GPU's arithmetic returns its canonical NaN).
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    differ += !(std::isnan(got[i]) && std::isnan(want[i])) && std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
  BOOST_TEST(differ == 0u);
  BOOST_TEST(std::memcmp(logits.data(), want.data(), got.size() * sizeof(float)) != 0);  // the edits changed something
}
