// Paged decode attention on a GPU against the cpu backend's paged_attention (itself checked
// against dense attention): several sequences of different lengths through shuffled block
// tables, GQA / MQA / MHA, head_dim 64 and 128, contexts inside one chunk and over several, KV
// planes in f32 and f16 written by the cpu write_kv (the same layout), queries and outputs in
// f32 and f16. Needs a GPU: without one the binary exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_paged_attention
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/model/paged_attention.hpp"
#include "kernels/cuda/paged_attention.hpp"
#include "tests/support/device_acts.hpp"
#include "tests/support/gpu_test_main.hpp"
#include "tests/support/normal_floats.hpp"
#include "tests/support/paged_kv_fixture.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>
#include <numeric>
#include <random>
#include <vector>

using namespace actorlm;
namespace cpu = actorlm::kernels::cpu;
namespace gpu = actorlm::kernels::cuda;
using gpu::ActDtype;
using testing::DeviceActs;
using testing::DeviceArray;
using testing::rounded;

namespace {

struct Case {
  std::int32_t q_heads, kv_heads, head_dim;
  std::vector<std::uint32_t> contexts;
  std::uint32_t chunk;
};

}  // namespace

BOOST_AUTO_TEST_CASE(decode_attention_matches_the_cpu_kernel) {
  const std::vector<Case> cases = {{9, 3, 64, {1, 17, 300, 1000}, 512}, {8, 8, 128, {5, 2100}, 256},
                                   {8, 1, 64, {129, 64}, 64}, {4, 2, 128, {700}, 2048},
                                   {32, 8, 128, {33, 4100, 16}, 512}, {71, 1, 64, {257, 3}, 256},
                                   {16, 2, 128, {3000, 1025}, 1024}};
  for (const Case& c : cases)
    for (const auto cache : {ActDtype::f32, ActDtype::f16, ActDtype::bf16})
      for (const auto act : {ActDtype::f32, ActDtype::f16, ActDtype::bf16}) {
        const auto seqs = static_cast<std::int32_t>(c.contexts.size());
        const std::uint32_t max_ctx = *std::max_element(c.contexts.begin(), c.contexts.end());
        const testing::PagedKvFixture kv(c.kv_heads, c.head_dim, c.contexts, cache);
        const std::int32_t hd = c.head_dim, qw = c.q_heads * hd;
        const auto q = rounded(testing::normal_floats(std::size_t(seqs) * qw, 1), act);
        std::vector<float> want(q.size());
        const float scale = 1.0f / std::sqrt(float(hd));
        for (std::int32_t s = 0; s < seqs; ++s)
          cpu::paged_attention(kv.kp, kv.vp, kv.table(s), c.contexts[s] - 1, 1, q.data() + std::size_t(s) * qw, qw,
                               c.q_heads, scale, want.data() + std::size_t(s) * qw);
        DeviceActs dq(q, act), dout(std::vector<float>(q.size()), act);
        DeviceArray<std::uint32_t> dt(kv.tables), dctx(c.contexts);
        DeviceArray<float> ws(std::vector<float>(gpu::decode_attention_workspace_floats(seqs, c.q_heads, hd, max_ctx, c.chunk)));
        gpu::DecodeAttentionParams p;
        p.q = dq.ptr;
        p.k_plane = kv.k_device();
        p.v_plane = kv.v_device();
        p.block_tables = dt.ptr;
        p.context_lens = dctx.ptr;
        p.out = dout.ptr;
        p.workspace = ws.ptr;
        p.seqs = seqs;
        p.q_heads = c.q_heads;
        p.kv_heads = c.kv_heads;
        p.head_dim = hd;
        p.block_size = kv.block_size;
        p.max_blocks_per_seq = kv.per_seq;
        p.max_context = max_ctx;
        p.chunk_positions = c.chunk;
        p.scale = scale;
        p.act_dtype = act;
        p.cache_dtype = cache;
        // Twice on one workspace: a launch leaves nothing in it that the next one depends on.
        for (int launch = 0; launch < 2; ++launch) {
          ACTORLM_CUDA_CHECK(cudaMemset(dout.ptr, 0xff, q.size() * gpu::act_bytes(act)));  // NaN until written
          gpu::decode_attention(p, nullptr);
          ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
          const auto got = dout.read();
          const double worst = testing::attention_error(got, want), bound = testing::attention_tolerance(act);
          BOOST_TEST(worst <= bound, c.q_heads << "/" << c.kv_heads << " hd " << hd << " cache " << cache << " act "
                                                << act << " launch " << launch << ": " << worst);
        }
      }
}

BOOST_AUTO_TEST_CASE(decode_attention_refuses_what_it_cannot_run) {
  float* any = nullptr;
  ACTORLM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&any), 4096));
  gpu::DecodeAttentionParams p;
  p.q = p.k_plane = p.v_plane = p.out = any;
  p.block_tables = p.context_lens = reinterpret_cast<const std::uint32_t*>(any);
  p.workspace = any;
  p.seqs = 1;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.head_dim = 96;  // only 64 and 128
  p.block_size = 16;
  p.max_blocks_per_seq = 4;
  p.max_context = 64;
  p.chunk_positions = 64;
  BOOST_CHECK_THROW(gpu::decode_attention(p, nullptr), std::invalid_argument);
  p.head_dim = 64;
  p.chunk_positions = 40;  // not whole blocks
  BOOST_CHECK_THROW(gpu::decode_attention(p, nullptr), std::invalid_argument);
  p.chunk_positions = 64;
  p.max_context = 65;  // past the tables
  BOOST_CHECK_THROW(gpu::decode_attention(p, nullptr), std::invalid_argument);
  p.kv_heads = 3;  // 4 query heads do not share 3 KV heads evenly
  p.max_context = 64;
  BOOST_CHECK_THROW(gpu::decode_attention(p, nullptr), std::invalid_argument);
  p.kv_heads = 2;
  p.block_size = 12;  // not a power of two
  p.chunk_positions = 48;
  p.max_context = 48;
  BOOST_CHECK_THROW(gpu::decode_attention(p, nullptr), std::invalid_argument);
  cudaFree(any);
}

BOOST_AUTO_TEST_CASE(the_chosen_chunk_is_whole_blocks_and_runs) {
  int sms = 0;
  ACTORLM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (const std::uint32_t bs : {8u, 16u, 32u, 128u})
    for (const std::int32_t seqs : {1, 3, 64, 256})
      for (const std::uint32_t ctx : {1u, 100u, 512u, 4096u, 32768u})
        for (const auto& [qh, kvh, hd] : {std::tuple{32, 8, 128}, std::tuple{71, 1, 64}, std::tuple{8, 8, 64}}) {
          gpu::DecodeAttentionParams p;
          p.seqs = seqs, p.q_heads = qh, p.kv_heads = kvh, p.head_dim = hd, p.block_size = bs, p.max_context = ctx;
          p.act_dtype = p.cache_dtype = ActDtype::bf16;
          const std::uint32_t c = gpu::decode_attention_chunk(p);
          BOOST_TEST((c % bs == 0 && c >= std::max(64u, bs) && c <= 2048u),
                     "bs " << bs << " seqs " << seqs << " ctx " << ctx << " heads " << qh << "/" << kvh << ": " << c);
          // Never longer than the context needs (rounded to whole blocks of at least 64).
          BOOST_TEST(c <= std::max({64u, bs, (ctx + 63) / 64 * 64}), "ctx " << ctx << " got " << c);
        }
  // A single sequence of 32k on this device: several chunks, so more than one block per KV head.
  gpu::DecodeAttentionParams one;
  one.seqs = 1, one.q_heads = 32, one.kv_heads = 8, one.head_dim = 128, one.block_size = 16, one.max_context = 32768;
  BOOST_TEST(gpu::decode_attention_chunk(one) < 32768u);
  BOOST_TEST_MESSAGE(sms << " multiprocessors: chunk " << gpu::decode_attention_chunk(one) << " for one sequence of 32k");
}
