// The sim shard's draws under the sampling parameters it models: unchanged without them,
// logit_bias as weights e^bias against uniform logits (-100 bans, +100 forces, ln 2 doubles),
// min_tokens' stop ids never drawn before then, and the EOS drawn only when biased up.
#define BOOST_TEST_MODULE sim_draw
#include <boost/test/unit_test.hpp>

#include "sim/backend/sim_backend.hpp"
#include "sim/backend/sim_shard.hpp"

#include <cmath>

using namespace actorlm;

namespace {

constexpr std::uint32_t kVocab = 10;
constexpr std::int32_t kEos = 9;

sim::SimShardModel shard_model() {
  const auto& cat = sim::Catalogue::builtin();
  return sim::SimShardModel{sim::CostModel(cat.model("falcon-7b"), cat.hardware("a10g"), {}, 16), kVocab, kEos, 5};
}

sim::SimSequences::Seq seq() {
  sim::SimSequences::Seq s;
  s.request = 3;
  s.prompt_len = 4;
  s.seed = 11;
  return s;
}

std::vector<int> counts(const sim::SimShardModel& m, const sim::SimSequences::Seq& s, std::uint32_t generated) {
  std::vector<int> c(kVocab);
  for (std::uint64_t pos = 0; pos < 11000; ++pos) ++c[std::size_t(sim::sim_draw(m, s, 0, pos, generated).token)];
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(without_bias_or_min_tokens_a_draw_is_sim_tokens) {
  const auto m = shard_model();
  const auto s = seq();
  for (std::uint64_t pos = 0; pos < 100; ++pos) {
    const auto d = sim::sim_draw(m, s, 1, pos, 0);
    BOOST_TEST(d.token == sim::sim_token(5, 11, 3, 1, pos, kVocab, kEos));
    BOOST_TEST(d.logprob == -std::log(float(kVocab)));
  }
}

BOOST_AUTO_TEST_CASE(a_bias_of_minus_100_bans_a_token_and_plus_100_forces_one) {
  const auto m = shard_model();
  auto s = seq();
  s.logit_bias = {{4, -100.0f}};
  BOOST_TEST(counts(m, s, 0)[4] == 0);
  s.logit_bias = {{2, 100.0f}};
  BOOST_TEST(counts(m, s, 0)[2] == 11000);
  BOOST_TEST(sim::sim_draw(m, s, 0, 7, 0).logprob == 0.0f, boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(a_bias_weighs_its_token_e_to_the_bias_against_the_others) {
  const auto m = shard_model();
  auto s = seq();
  s.logit_bias = {{3, std::log(2.0f)}};  // weights: 2 for token 3, 1 for 0..8 but 3, 0 for the EOS
  const auto c = counts(m, s, 0);
  BOOST_TEST(c[kEos] == 0);
  BOOST_TEST((c[3] > 1800 && c[3] < 2600));  // 2200 expected, ~40 standard deviation
  for (int t : {0, 1, 2, 4, 5, 6, 7, 8}) BOOST_TEST((c[std::size_t(t)] > 900 && c[std::size_t(t)] < 1300));
  BOOST_TEST(sim::sim_draw(m, s, 0, 0, 0).logprob < 0.0f);
}

BOOST_AUTO_TEST_CASE(min_tokens_stop_ids_are_never_drawn_before_min_tokens) {
  const auto m = shard_model();
  auto s = seq();
  s.min_tokens = 2;
  s.min_tokens_stop_ids = {1, 6};
  for (std::uint32_t generated : {0u, 1u}) {
    const auto c = counts(m, s, generated);
    BOOST_TEST(c[1] == 0);
    BOOST_TEST(c[6] == 0);
  }
  const auto after = counts(m, s, 2);
  BOOST_TEST(after[1] > 0);
  BOOST_TEST(after[6] > 0);
  s.logit_bias = {{1, 100.0f}};  // masked wins over a bias, as -inf + 100 is -inf
  BOOST_TEST(counts(m, s, 0)[1] == 0);
}

BOOST_AUTO_TEST_CASE(a_step_masks_by_the_tokens_its_sequence_has_generated) {
  const auto m = shard_model();
  shard::SamplingParams sampling;
  sampling.min_tokens = 3;
  sampling.logit_bias = {{6, 100.0f}};  // would always be drawn
  sampling.min_tokens_stop_ids = {6};
  shard::Step step;
  step.added = {{1, 7, 0, 4, {5, 5, 5, 5, 0, 0}, sampling}};  // prompt 4, two generated
  shard::SeqWork w;
  w.seq = 1;
  w.begin = 0;
  w.end = 6;
  w.num_samples = 1;
  step.seqs = {w};
  sim::SimSequences seqs;
  BOOST_TEST(sim::simulate_step(m, seqs, step).tokens.at(0).token != 6);  // 2 < min_tokens
  shard::Step next;
  w.appended = 0;
  w.begin = 6;
  w.end = 7;  // three generated
  next.seqs = {w};
  BOOST_TEST(sim::simulate_step(m, seqs, next).tokens.at(0).token == 6);
}

BOOST_AUTO_TEST_CASE(the_eos_is_never_drawn_unless_a_positive_bias_asks_for_it) {
  const auto m = shard_model();
  auto s = seq();
  s.logit_bias = {{kEos, -5.0f}};
  BOOST_TEST(counts(m, s, 0)[kEos] == 0);
  s.logit_bias = {{kEos, std::log(2.0f)}};  // weight 2 against 1 for each of the 9 others
  const int eos = counts(m, s, 0)[kEos];
  BOOST_TEST((eos > 1800 && eos < 2600));  // 2,000 expected
  s.logit_bias = {{kEos, 100.0f}};  // how a capped workload stops when the EOS is its stop token
  s.min_tokens = 3;
  s.min_tokens_stop_ids = {kEos};
  BOOST_TEST(counts(m, s, 2)[kEos] == 0);
  BOOST_TEST(counts(m, s, 3)[kEos] == 11000);
}
