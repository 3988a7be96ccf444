// logit_edits (the cuda sampler's per-token form of a sequence's logit changes) against the host
// sampler's own changes (HostSampler::process_row): random rows with NaN and infinities, random
// prompts and outputs (ids outside the vocabulary among them), and every mix of logit_bias,
// min_tokens' mask, repetition, presence and frequency penalties give the same bits (-0 kept
// where nothing is added). A token biased twice is refused.
#define BOOST_TEST_MODULE logit_edits
#include <boost/test/unit_test.hpp>

#include "actors/shard/host_sampler.hpp"
#include "actors/shard/logit_edits.hpp"
#include "tests/support/logit_rows.hpp"

#include <cstring>
#include <random>

using actorlm::shard::HostSampler;
using actorlm::shard::SequenceState;
namespace m = actorlm::kernels::cuda_math;

BOOST_AUTO_TEST_CASE(edits_applied_token_by_token_give_the_host_samplers_row_bit_for_bit) {
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<float> penalty(-2.0f, 2.0f);
  std::size_t changed = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const std::size_t vocab = 1 + rng() % 400;
    const auto id = [&] { return std::int32_t(rng() % (vocab + 10)) - 5; };  // a few outside
    SequenceState::Sequence s;
    s.prompt_len = std::uint32_t(rng() % 50);
    const std::size_t generated = rng() % 40;
    for (std::size_t i = 0; i < s.prompt_len + generated; ++i) s.tokens.push_back(id());
    auto& p = s.sampling;
    if (rng() % 2)
      for (int i = 0, n = int(rng() % 6); i < n; ++i) {
        const std::int32_t t = id();
        bool dup = false;
        for (const auto& b : p.logit_bias) dup |= b.token == t;
        if (!dup) p.logit_bias.push_back({t, penalty(rng) * 50.0f});
      }
    if (rng() % 2) {
      p.min_tokens = std::uint32_t(rng() % 60);
      for (int i = 0, n = int(1 + rng() % 3); i < n; ++i) p.min_tokens_stop_ids.push_back(id());
    }
    const float repetition[] = {1.0f, 0.7f, 1.2f, 2.0f};
    p.repetition_penalty = repetition[rng() % 4];
    if (rng() % 2) p.presence_penalty = penalty(rng);
    if (rng() % 2) p.frequency_penalty = penalty(rng);

    auto row = actorlm::testing::random_logit_row(rng, vocab);
    for (int i = 0; i < 10; ++i) row[rng() % vocab] = -0.0f;  // x + 0 would make it +0: no bias, no add
    auto want = row;
    HostSampler::process_row(s, want);
    std::vector<m::LogitEdit> edits{{-7, 0, 0, 1, 0}};  // appends after what is there
    BOOST_REQUIRE(actorlm::shard::logit_edits(s, vocab, edits));
    BOOST_REQUIRE(edits.front().token == -7);
    auto got = row;
    for (std::size_t e = 1; e < edits.size(); ++e) {
      const auto& edit = edits[e];
      BOOST_REQUIRE(edit.token >= 0 && std::size_t(edit.token) < vocab);
      if (e > 1) BOOST_REQUIRE(edits[e - 1].token < edit.token);  // one per token, ascending
      got[std::size_t(edit.token)] = m::apply_logit_edit(got[std::size_t(edit.token)], edit);
    }
    BOOST_TEST_CONTEXT("trial " << trial) {
      BOOST_TEST(std::memcmp(got.data(), want.data(), vocab * sizeof(float)) == 0);
    }
    changed += std::memcmp(row.data(), want.data(), vocab * sizeof(float)) != 0;
  }
  BOOST_TEST(changed > 300u);  // most trials changed their row
}

BOOST_AUTO_TEST_CASE(a_token_biased_twice_is_refused_and_nothing_is_appended) {
  SequenceState::Sequence s;
  s.tokens = {1, 2, 3};
  s.sampling.logit_bias = {{5, 1.0f}, {7, -2.0f}, {5, 3.0f}};
  std::vector<m::LogitEdit> edits{{0, 0, 0, 1, 0}};
  BOOST_TEST(!actorlm::shard::logit_edits(s, 100, edits));
  BOOST_TEST(edits.size() == 1u);
}
