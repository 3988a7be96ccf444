// take_prompt_logprobs and prompt_slices (actors/shard/prompt_logprobs.hpp) on random steps: the
// slices a vocabulary-parallel rank projects in lockstep are exactly those the sampling rank
// projects, also when a projection fails part-way; every scored row is scored from its own row of
// logits (checked against kernels::cpu::score of the logits the test made for that row).
#define BOOST_TEST_MODULE prompt_logprobs
#include <boost/test/unit_test.hpp>

#include "actors/shard/prompt_logprobs.hpp"
#include "kernels/cpu/sampling.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace actorlm::shard {
namespace {

using Slices = std::vector<std::pair<std::int64_t, std::int64_t>>;

constexpr std::size_t vocab = 37;

// Row `row` of the kept rows' logits: distinct per row, so a row read from the wrong place scores
// differently.
float logit(std::int64_t row, std::size_t v) {
  return static_cast<float>((row * 7919 + static_cast<std::int64_t>(v) * 104729) % 1009) / 97.0f;
}

// A kept row that scores a prompt token: SeqWork `i`'s position `p` scores token p + 1.
struct ScoredRow {
  std::size_t i;
  std::uint32_t p;
  std::int64_t row;  // among the kept rows
};

struct RandomStep {
  Step step;
  std::vector<SequenceState::Sequence> seqs;  // one per SeqWork (padding rows' unused)
  std::vector<const SequenceState::Sequence*> work;
  std::int64_t kept = 0;  // rows the forward keeps
  std::vector<ScoredRow> scored;  // in step and position order
};

RandomStep random_step(std::mt19937& rng) {
  RandomStep r;
  const int n = std::uniform_int_distribution<int>(0, 8)(rng);
  r.seqs.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto& s = r.seqs[static_cast<std::size_t>(i)];
    s.prompt_len = std::uniform_int_distribution<std::uint32_t>(1, 40)(rng);
    const std::uint32_t generated = std::uniform_int_distribution<std::uint32_t>(0, 3)(rng);
    for (std::uint32_t t = 0; t < s.prompt_len + generated; ++t)
      s.tokens.push_back(std::uniform_int_distribution<kv::TokenId>(0, vocab - 1)(rng));
    s.sampling.prompt_logprobs = std::uniform_int_distribution<std::int32_t>(-1, 3)(rng);
    SeqWork w;
    w.seq = static_cast<kv::SeqId>(i + 1);
    w.padding = std::uniform_int_distribution<int>(0, 9)(rng) == 0;
    const auto length = static_cast<std::uint32_t>(s.tokens.size());
    w.begin = std::uniform_int_distribution<std::uint32_t>(0, length - 1)(rng);
    w.end = std::uniform_int_distribution<std::uint32_t>(w.begin + 1, length)(rng);
    r.step.seqs.push_back(w);
    r.work.push_back(w.padding ? nullptr : &s);
  }
  // The rows kept, by the rule written out here rather than through the code's predicate: a
  // sequence that asks for prompt log-probabilities keeps every row of a chunk that starts
  // before its last prompt token.
  for (std::size_t i = 0; i < r.step.seqs.size(); ++i) {
    const SeqWork& w = r.step.seqs[i];
    const auto& s = r.seqs[i];
    if (w.padding || s.sampling.prompt_logprobs < 0 || w.begin + 1 >= s.prompt_len) continue;
    for (std::uint32_t p = w.begin; p < w.end; ++p, ++r.kept)
      if (p + 1 < s.prompt_len) r.scored.push_back({i, p, r.kept});
  }
  return r;
}

// What the slices must be, from their definition: each slice-aligned run of `slice` rows (cut at
// `kept`) holding a scored row, in order.
Slices expected_slices(const std::vector<ScoredRow>& scored, std::int64_t kept, std::int64_t slice) {
  Slices out;
  for (std::int64_t first = 0; first < kept; first += slice) {
    const std::int64_t count = std::min(slice, kept - first);
    for (const ScoredRow& x : scored)
      if (x.row >= first && x.row < first + count) {
        out.emplace_back(first, count);
        break;
      }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_rank_projects_the_slices_that_the_sampling_rank_scores_even_when_one_fails) {
  std::mt19937 rng(20261206);
  int with_rows = 0, with_failure = 0, several_slices = 0;
  for (int round = 0; round < 2000; ++round) {
    const RandomStep r = random_step(rng);
    const std::int64_t slice = std::uniform_int_distribution<std::int64_t>(1, 12)(rng);
    const std::string what = "round " + std::to_string(round) + ", slice " + std::to_string(slice);
    const Slices slices = prompt_slices(r.step, r.work, r.kept, slice);
    BOOST_TEST_REQUIRE((slices == expected_slices(r.scored, r.kept, slice)), what);
    with_rows += !slices.empty();
    several_slices += slices.size() > 1;

    // A projection that fails on one of the slices (or none), chosen at random.
    const int fail_at = slices.empty() ? -1 : std::uniform_int_distribution<int>(-2, int(slices.size()) - 1)(rng);
    Slices projected;
    const PromptRows rows = [&](std::int64_t first, std::int64_t count, std::vector<float>& out) {
      projected.emplace_back(first, count);
      if (int(projected.size()) - 1 == fail_at) throw std::runtime_error("projection failed");
      out.resize(static_cast<std::size_t>(count) * vocab);
      for (std::int64_t k = 0; k < count; ++k)
        for (std::size_t v = 0; v < vocab; ++v) out[static_cast<std::size_t>(k) * vocab + v] = logit(first + k, v);
    };
    std::vector<PromptLogprob> out(1);  // an entry from before, which must stay as it is
    out[0].seq = 999;
    bool threw = false;
    try {
      take_prompt_logprobs(r.step, r.work, r.kept, rows, vocab, slice, nullptr, out);
    } catch (const std::runtime_error& e) {
      threw = true;
      BOOST_TEST(std::string(e.what()) == "projection failed", what);
    }
    BOOST_TEST((projected == slices), what);
    BOOST_TEST(threw == (fail_at >= 0), what);
    BOOST_TEST_REQUIRE(out.size() == (threw ? 1u : 1u + r.scored.size()), what);
    BOOST_TEST(out[0].seq == 999u, what);
    with_failure += threw;
    if (threw) continue;

    // Each entry in step and position order, scored from its own row.
    for (std::size_t e = 0; e < r.scored.size(); ++e) {
      const auto [i, p, row] = r.scored[e];
      const auto& s = r.seqs[i];
      const PromptLogprob& got = out[1 + e];
      std::vector<float> logits(vocab);
      for (std::size_t v = 0; v < vocab; ++v) logits[v] = logit(row, v);
      const auto want = kernels::cpu::score(logits, s.tokens[p + 1], static_cast<std::uint32_t>(s.sampling.prompt_logprobs));
      BOOST_TEST(got.seq == r.step.seqs[i].seq, what);
      BOOST_TEST(got.position == p + 1, what);
      BOOST_TEST(got.token == s.tokens[p + 1], what);
      BOOST_TEST(got.logprob == want.logprob, what);
      BOOST_TEST(got.rank == want.rank, what);
      BOOST_TEST_REQUIRE(got.top.size() == want.top.size(), what);
      for (std::size_t k = 0; k < want.top.size(); ++k) {
        BOOST_TEST(got.top[k].token == want.top[k].token, what);
        BOOST_TEST(got.top[k].logprob == want.top[k].logprob, what);
      }
    }
  }
  // The random steps reached every case.
  BOOST_TEST(with_rows > 200);
  BOOST_TEST(several_slices > 100);
  BOOST_TEST(with_failure > 100);
}

BOOST_AUTO_TEST_CASE(a_step_whose_rows_do_not_match_the_forwards_count_is_refused) {
  std::mt19937 rng(7);
  for (;;) {
    const RandomStep r = random_step(rng);
    if (r.scored.empty()) continue;
    BOOST_CHECK_THROW(prompt_slices(r.step, r.work, r.kept + 1, 4), std::logic_error);
    BOOST_CHECK_THROW(prompt_slices(r.step, r.work, r.kept, 0), std::invalid_argument);
    break;
  }
}

}  // namespace actorlm::shard
