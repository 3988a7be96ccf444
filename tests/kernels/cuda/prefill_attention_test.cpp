// Prefill attention on a GPU against the cpu backend's paged_attention with several query rows:
// sequences whose new rows are a whole prompt, a chunk after earlier chunks already in the cache,
// or a single row; rows not a multiple of the 16-row tile and contexts not of the 32-position
// one; GQA / MQA / MHA, head_dim 64 and 128; caches and activations in f32, f16 and bf16 (the
// cache written by the cpu write_kv, as PagedKvFixture says). Outputs start as NaN, so a row left
// unwritten fails. Needs a GPU: without one the binary exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_prefill_attention
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/model/paged_attention.hpp"
#include "kernels/cuda/prefill_attention.hpp"
#include "tests/support/device_acts.hpp"
#include "tests/support/gpu_test_main.hpp"
#include "tests/support/normal_floats.hpp"
#include "tests/support/paged_kv_fixture.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace actorlm;
namespace cpu = actorlm::kernels::cpu;
namespace gpu = actorlm::kernels::cuda;
using gpu::ActDtype;
using testing::DeviceActs;
using testing::DeviceArray;
using testing::rounded;

namespace {

struct Seq {
  std::uint32_t new_rows, context;  // the last new_rows positions of context are this step's
};

struct Case {
  std::int32_t q_heads, kv_heads, head_dim;
  std::vector<Seq> seqs;
  float q_sd = 1;                  // larger: sharper softmax rows (bigger jumps of the running maximum)
  std::uint32_t block_size = 16;   // 8: a 32-position tile spans 4 blocks; 32 and 64: tiles inside one block
};

}  // namespace

BOOST_AUTO_TEST_CASE(prefill_attention_matches_the_cpu_kernel) {
  const std::vector<Case> cases = {
      {8, 2, 64, {{17, 17}, {40, 100}, {1, 1}, {5, 300}}},  // a prompt, a chunk after 60 cached, one row
      {4, 4, 128, {{33, 33}, {64, 64}, {16, 80}}},
      {9, 3, 64, {{100, 130}}},
      {71, 1, 64, {{20, 20}, {3, 50}}},
      {32, 8, 128, {{48, 48}, {31, 95}}},
      // One row over a long context (as decode rows of a mixed step once were), a long chunk, a
      // sequence with no new rows, under sharp softmax rows.
      {8, 2, 128, {{1, 1500}, {7, 1300}, {0, 40}, {16, 16}}, 4.0f},
      {8, 2, 64, {{17, 17}, {40, 100}, {5, 300}}, 1.0f, 8},
      {4, 4, 128, {{33, 33}, {16, 80}, {1, 77}}, 1.0f, 32},
      {8, 2, 64, {{40, 100}, {64, 64}}, 2.0f, 64}};
  for (const Case& c : cases)
    for (const auto cache : {ActDtype::f32, ActDtype::f16, ActDtype::bf16})
      for (const auto act : {ActDtype::f32, ActDtype::f16, ActDtype::bf16}) {
        std::vector<std::uint32_t> contexts, starts = {0};
        std::uint32_t max_rows = 0;
        for (const Seq& s : c.seqs) {
          contexts.push_back(s.context);
          starts.push_back(starts.back() + s.new_rows);
          max_rows = std::max(max_rows, s.new_rows);
        }
        const testing::PagedKvFixture kv(c.kv_heads, c.head_dim, contexts, cache, c.block_size);
        const std::int32_t hd = c.head_dim, qw = c.q_heads * hd;
        auto q = testing::normal_floats(std::size_t(starts.back()) * qw, 1);
        for (float& x : q) x *= c.q_sd;
        q = rounded(q, act);
        std::vector<float> want(q.size());
        const float scale = 1.0f / std::sqrt(float(hd));
        for (std::size_t s = 0; s < c.seqs.size(); ++s)
          cpu::paged_attention(kv.kp, kv.vp, kv.table(s), c.seqs[s].context - c.seqs[s].new_rows, c.seqs[s].new_rows,
                               q.data() + std::size_t(starts[s]) * qw, qw, c.q_heads, scale,
                               want.data() + std::size_t(starts[s]) * qw);
        DeviceActs dq(q, act), dout(std::vector<float>(q.size(), NAN), act);
        DeviceArray<std::uint32_t> dt(kv.tables), dstarts(starts), dctx(contexts);
        gpu::PrefillAttentionParams p;
        p.q = dq.ptr;
        p.k_plane = kv.k_device();
        p.v_plane = kv.v_device();
        p.block_tables = dt.ptr;
        p.query_starts = dstarts.ptr;
        p.context_lens = dctx.ptr;
        p.out = dout.ptr;
        p.seqs = std::int32_t(c.seqs.size());
        p.q_heads = c.q_heads;
        p.kv_heads = c.kv_heads;
        p.head_dim = hd;
        p.block_size = kv.block_size;
        p.max_blocks_per_seq = kv.per_seq;
        p.max_query_len = max_rows;
        p.scale = scale;
        p.act_dtype = act;
        p.cache_dtype = cache;
        gpu::prefill_attention(p, nullptr);
        ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
        const auto got = dout.read();
        const double worst = testing::attention_error(got, want), bound = testing::attention_tolerance(act);
        BOOST_TEST(worst <= bound, c.q_heads << "/" << c.kv_heads << " hd " << hd << " block " << c.block_size
                                              << " cache " << cache << " act " << act << ": " << worst);
      }
}

BOOST_AUTO_TEST_CASE(prefill_attention_refuses_what_it_cannot_run) {
  float* any = nullptr;
  ACTORLM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&any), 4096));
  gpu::PrefillAttentionParams p;
  p.q = p.k_plane = p.v_plane = p.out = any;
  p.block_tables = p.query_starts = p.context_lens = reinterpret_cast<const std::uint32_t*>(any);
  p.seqs = 1;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.head_dim = 96;  // only 64 and 128
  p.block_size = 16;
  p.max_blocks_per_seq = 4;
  p.max_query_len = 8;
  BOOST_CHECK_THROW(gpu::prefill_attention(p, nullptr), std::invalid_argument);
  p.head_dim = 64;
  p.kv_heads = 3;  // 4 query heads do not share 3 KV heads evenly
  BOOST_CHECK_THROW(gpu::prefill_attention(p, nullptr), std::invalid_argument);
  p.kv_heads = 2;
  p.q = nullptr;
  BOOST_CHECK_THROW(gpu::prefill_attention(p, nullptr), std::invalid_argument);
  cudaFree(any);
}
