// decode_attention_chunk's rule on the host, in every build (CUDA or not): the candidates it
// considers, and its choice on the launches an H200 measured (132 multiprocessors, 6 thread blocks
// of the 32/8-head kernel resident on each), where tools/gpu/decode_attention_bench --chunk timed
// every candidate: the rule must pick the fastest of those measured.
#define BOOST_TEST_MODULE decode_chunk_rule
#include <boost/test/unit_test.hpp>

#include "kernels/cuda/decode_chunk_rule.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace actorlm::kernels::cuda;

namespace {

constexpr int h200_sms = 132;
constexpr std::uint64_t h200_resident = 6 * h200_sms;

// The fits of a 32 query / 8 KV head launch (4 query heads per block: 8 blocks per sequence and
// chunk) on the H200.
std::vector<ChunkFit> h200_fits(std::uint32_t seqs, std::uint32_t context) {
  std::vector<ChunkFit> fits;
  for (const std::uint32_t c : decode_chunk_candidates(context, 16, 2048))
    fits.push_back({c, std::uint64_t(seqs) * 8 * ((context + c - 1) / c), h200_resident});
  return fits;
}

}  // namespace

BOOST_AUTO_TEST_CASE(candidates_are_whole_blocks_no_longer_than_the_context_needs_longest_first) {
  BOOST_TEST(decode_chunk_candidates(4096, 16, 2048) == (std::vector<std::uint32_t>{2048, 1024, 512, 256, 128, 64}));
  BOOST_TEST(decode_chunk_candidates(100, 16, 2048) == (std::vector<std::uint32_t>{128, 64}));
  BOOST_TEST(decode_chunk_candidates(1, 16, 2048) == (std::vector<std::uint32_t>{64}));
  BOOST_TEST(decode_chunk_candidates(4096, 128, 2048) == (std::vector<std::uint32_t>{2048, 1024, 512, 256, 128}));
  BOOST_TEST(decode_chunk_candidates(10, 128, 2048) == (std::vector<std::uint32_t>{128}));
  for (const std::uint32_t bs : {8u, 16u, 32u, 128u, 256u})
    for (const std::uint32_t ctx : {1u, 63u, 100u, 512u, 3000u, 32768u})
      for (const std::uint32_t c : decode_chunk_candidates(ctx, bs, 2048)) {
        BOOST_TEST(c % bs == 0);
        BOOST_TEST(c >= std::max(64u, bs));
        BOOST_TEST(c <= std::max({64u, bs, (ctx + 63) / 64 * 64, (ctx + bs - 1) / bs * bs}));
      }
}

BOOST_AUTO_TEST_CASE(picks_the_chunk_the_h200_measured_fastest) {
  // Milliseconds per launch measured at each chunk (bf16, head_dim 128; device runs 5 to 8):
  // batch 64 x 4k: 512 0.359, 1024 0.329, 2048 0.345 (1.3 waves: a thin last wave).
  BOOST_TEST(choose_decode_chunk(h200_fits(64, 4096), h200_sms) == 1024u);
  // batch 256 x 4k: 1024 1.150, 2048 1.137.
  BOOST_TEST(choose_decode_chunk(h200_fits(256, 4096), h200_sms) == 2048u);
  // batch 64 x 32k: 512 2.49, 1024 2.26, 2048 2.18.
  BOOST_TEST(choose_decode_chunk(h200_fits(64, 32768), h200_sms) == 2048u);
  // One sequence of 32k: 128 0.136, 256 0.101, 512 0.072, 1024 0.086, 2048 0.127.
  BOOST_TEST(choose_decode_chunk(h200_fits(1, 32768), h200_sms) == 512u);
  // 64 sequences of 512: 128 0.102, 512 0.063 (one chunk each).
  BOOST_TEST(choose_decode_chunk(h200_fits(64, 512), h200_sms) == 512u);
  // One sequence of 4k: 64 0.040 (512 thread blocks) against 512 0.140 (64; device run 1, the
  // kernel before it read rows 16 bytes at a time).
  BOOST_TEST(choose_decode_chunk(h200_fits(1, 4096), h200_sms) == 64u);
}

BOOST_AUTO_TEST_CASE(a_launch_too_small_for_any_rule_takes_the_shortest_chunk) {
  BOOST_TEST(choose_decode_chunk(h200_fits(1, 512), h200_sms) == 64u);  // 64 blocks at best
  BOOST_TEST(choose_decode_chunk({{256, 1, 1}}, h200_sms) == 256u);      // a single candidate
}
