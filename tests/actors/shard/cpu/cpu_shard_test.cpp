// CpuShard without actors: a Step's sampled tokens carry log-probabilities consistent with the
// forward's logits, copy-on-write copies carry KV between blocks, and steps the shard cannot
// run are refused with std::invalid_argument (the actor's error reply).
#define BOOST_TEST_MODULE cpu_shard
#include <boost/test/unit_test.hpp>

#include "actors/shard/cpu/cpu_shard.hpp"
#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"

#include <cmath>

using namespace actorlm;

namespace {

struct Fixture {
  std::unique_ptr<model::TensorSource> src = model::open_tensor_source(std::string(ACTORLM_MODEL_FIXTURES) + "/llama.gguf");
  model::Architecture spec = model::read_architecture(*src);
  std::shared_ptr<const kernels::cpu::ModelWeights> weights =
      std::make_shared<kernels::cpu::ModelWeights>(kernels::cpu::load_weights(*src, spec));
  shard::CpuShard make() const { return shard::CpuShard(weights, {4, 32, 8}); }
};

shard::SeqWork prefill(kv::SeqId seq, std::vector<kv::TokenId> tokens, std::vector<kv::BlockId> table) {
  shard::SeqWork w;
  w.seq = seq;
  w.request = seq;
  w.tokens = std::move(tokens);
  w.block_table = std::move(table);
  w.num_samples = 1;
  w.sampling.temperature = 0.0f;
  return w;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(sampled_tokens_carry_consistent_log_probabilities, Fixture) {
  auto s = make();
  shard::Step step;
  step.id = 1;
  step.block_size = 4;
  step.seqs.push_back(prefill(1, {5, 9, 200, 17, 3, 88}, {6, 2}));
  step.seqs.back().sampling.logprobs = true;
  step.seqs.back().sampling.top_logprobs = 5;
  const auto r = s.execute(step);
  BOOST_REQUIRE_EQUAL(r.tokens.size(), 1u);
  const auto& t = r.tokens[0];
  BOOST_REQUIRE_EQUAL(t.top.size(), 5u);
  BOOST_TEST(t.token == t.top[0].token);  // greedy picks the most likely token
  BOOST_TEST(t.logprob == t.top[0].logprob);
  double mass = 0;
  for (std::size_t i = 0; i < t.top.size(); ++i) {
    BOOST_TEST(t.top[i].logprob <= 0.0f);
    if (i > 0) BOOST_TEST(t.top[i].logprob <= t.top[i - 1].logprob);
    mass += std::exp(double(t.top[i].logprob));
  }
  BOOST_TEST(mass <= 1.0 + 1e-6);
}

BOOST_FIXTURE_TEST_CASE(a_copied_block_continues_the_sequence_like_the_original, Fixture) {
  auto s = make();
  shard::Step p;
  p.id = 1;
  p.block_size = 4;
  p.seqs.push_back(prefill(1, {1, 2, 3, 4, 5, 6}, {0, 1}));  // block 1 half full
  const auto first = s.execute(p).tokens.at(0).token;

  // Sequence 2 shares block 0 and gets a copy of block 1 (copy-on-write) as block 7.
  shard::Step d;
  d.id = 2;
  d.block_size = 4;
  d.copies.push_back({1, 7});
  auto a = prefill(1, {first}, {0, 1});
  a.first_position = 6;
  auto b = prefill(2, {first}, {0, 7});
  b.first_position = 6;
  d.seqs = {a, b};
  const auto r = s.execute(d);
  BOOST_REQUIRE_EQUAL(r.tokens.size(), 2u);
  BOOST_TEST(r.tokens[0].token == r.tokens[1].token);
  BOOST_TEST(r.tokens[0].logprob == r.tokens[1].logprob);
}

BOOST_FIXTURE_TEST_CASE(a_sequence_swapped_out_and_in_elsewhere_decodes_as_if_never_moved, Fixture) {
  auto stay = make(), moved = make();
  shard::Step p;
  p.id = 1;
  p.block_size = 4;
  p.seqs.push_back(prefill(1, {7, 8, 9, 10, 11, 12, 13}, {3, 5}));
  const auto t1 = stay.execute(p).tokens.at(0).token;
  BOOST_TEST(moved.execute(p).tokens.at(0).token == t1);

  shard::Step out;  // device blocks 3, 5 -> host 6, 0
  out.id = 2;
  out.block_size = 4;
  out.swap_out = {{3, 6}, {5, 0}};
  moved.execute(out);
  shard::Step scribble = p;  // reuse the freed device blocks for something else
  scribble.id = 3;
  scribble.seqs[0] = prefill(2, {100, 101, 102, 103, 104, 105, 106}, {5, 3});
  moved.execute(scribble);

  auto next = [&](shard::CpuShard& s, std::vector<kv::BlockId> table, std::vector<kv::BlockMove> swap_in) {
    shard::Step d;
    d.id = 4;
    d.block_size = 4;
    d.swap_in = std::move(swap_in);
    auto w = prefill(1, {t1}, std::move(table));
    w.first_position = 7;
    d.seqs.push_back(w);
    return s.execute(d).tokens.at(0);
  };
  const auto a = next(stay, {3, 5}, {});
  const auto b = next(moved, {9, 12}, {{6, 9}, {0, 12}});  // back in, to other device blocks
  BOOST_TEST(a.token == b.token);
  BOOST_TEST(a.logprob == b.logprob);
}

BOOST_FIXTURE_TEST_CASE(steps_the_shard_cannot_run_are_refused, Fixture) {
  auto s = make();
  shard::Step step;
  step.id = 1;
  step.block_size = 8;  // the cache uses 4
  step.seqs.push_back(prefill(1, {1, 2}, {0}));
  BOOST_CHECK_THROW(s.execute(step), std::invalid_argument);
  step.block_size = 4;
  step.seqs[0].tokens = {1, 999};  // outside the vocabulary of 256
  BOOST_CHECK_THROW(s.execute(step), std::invalid_argument);
  step.seqs[0] = prefill(1, {1, 2, 3, 4, 5}, {0});  // the table covers 4 positions, not 5
  BOOST_CHECK_THROW(s.execute(step), std::invalid_argument);
  step.seqs[0] = prefill(1, {1}, {40});  // block outside the cache of 32
  BOOST_CHECK_THROW(s.execute(step), std::invalid_argument);
  step.seqs.clear();
  step.copies.push_back({0, 32});
  BOOST_CHECK_THROW(s.execute(step), std::invalid_argument);
}
