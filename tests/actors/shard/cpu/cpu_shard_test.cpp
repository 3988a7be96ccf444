// CpuShard without actors: a Step's sampled tokens carry log-probabilities consistent with the
// forward's logits, prompt log-probabilities over a chunked prefill are HF transformers'
// log-softmax, copy-on-write copies carry KV between blocks, and steps the shard cannot
// run are refused with std::invalid_argument (the actor's error reply), by every stage of a
// layer split at once, before any of them waits for the hand-over.
#define BOOST_TEST_MODULE cpu_shard
#include <boost/test/unit_test.hpp>

#include "actors/shard/cpu/cpu_backend.hpp"
#include "actors/shard/cpu/cpu_shard.hpp"
#include "actors/shard/prompt_logprobs.hpp"
#include "tests/kernels/cpu/model/model_fixture.hpp"
#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <thread>

using namespace actorlm;

namespace {

shard::SamplingParams greedy() {
  shard::SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

struct Fixture {
  std::unique_ptr<model::TensorSource> src = model::open_tensor_source(std::string(ACTORLM_MODEL_FIXTURES) + "/llama.gguf");
  model::Architecture spec = model::read_architecture(*src);
  std::shared_ptr<const kernels::cpu::ModelWeights> weights =
      std::make_shared<kernels::cpu::ModelWeights>(kernels::cpu::load_weights(*src, spec));
  shard::CpuShard make() const { return shard::CpuShard(weights, {4, 32, 8}); }
};

// Adds a sequence the shard has not seen, with its whole prompt computed in this step.
shard::SeqWork& prefill(shard::Step& step, kv::SeqId seq, std::vector<kv::TokenId> tokens,
                        std::vector<kv::BlockId> table, shard::SamplingParams sampling = greedy()) {
  const auto n = static_cast<std::uint32_t>(tokens.size());
  step.added.push_back({seq, seq, 0, n, std::move(tokens), sampling});
  shard::SeqWork& w = step.seqs.emplace_back();
  w.seq = seq;
  w.end = n;
  w.table_blocks = std::move(table);
  w.num_samples = 1;
  return w;
}

// One decode token for a sequence the shard holds: `token` appended at position `position`,
// the table replaced from `table_first` on.
shard::SeqWork decode(kv::SeqId seq, kv::TokenId token, std::uint32_t position, std::uint32_t table_first,
                      std::vector<kv::BlockId> blocks) {
  shard::SeqWork w;
  w.seq = seq;
  w.appended = token;
  w.begin = position;
  w.end = position + 1;
  w.table_first = table_first;
  w.table_blocks = std::move(blocks);
  w.num_samples = 1;
  return w;
}

shard::Step step_of(std::uint64_t id) {
  shard::Step s;
  s.id = id;
  s.block_size = 4;
  return s;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(sampled_tokens_carry_consistent_log_probabilities, Fixture) {
  auto s = make();
  shard::Step step = step_of(1);
  shard::SamplingParams sampling = greedy();
  sampling.logprobs = true;
  sampling.top_logprobs = 5;
  prefill(step, 1, {5, 9, 200, 17, 3, 88}, {6, 2}, sampling);
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

// `got` holds sequence `seq`'s entries for positions 1 .. last of the reference prompt, in order:
// each is transformers' log-softmax of the row before it, with its rank and top 3.
void expect_transformers_scores(const std::vector<shard::PromptLogprob>& got, kv::SeqId seq,
                                const testing::Reference& ref, std::uint32_t last) {
  const std::vector<kv::TokenId> prompt(ref.prompt.begin(), ref.prompt.end());
  BOOST_REQUIRE_EQUAL(got.size(), last);  // every position but the first, once
  for (std::uint32_t p = 1; p <= last; ++p) {
    const auto& e = got[p - 1];
    BOOST_TEST(e.seq == seq);
    BOOST_TEST(e.position == p);
    BOOST_TEST(e.token == prompt[p]);
    // transformers' row at position p - 1 scores token p.
    const auto& row = ref.logits[p - 1];
    const float top = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (float x : row) sum += std::exp(double(x) - top);
    const auto log_softmax = [&](std::size_t t) { return double(row[t]) - top - std::log(sum); };
    BOOST_TEST(std::abs(e.logprob - log_softmax(std::size_t(prompt[p]))) < 1e-3, "position " << p);
    // Its rank: 1 + the tokens transformers gives a higher logit (where none is within 1e-3 of
    // it, so that the BLAS rounding cannot reorder them).
    const float own = row[std::size_t(prompt[p])];
    std::uint32_t above = 0;
    bool close = false;
    for (std::size_t t = 0; t < row.size(); ++t) {
      above += row[t] > own ? 1u : 0u;
      close = close || (t != std::size_t(prompt[p]) && std::abs(row[t] - own) < 1e-3f);
    }
    if (!close) BOOST_TEST(e.rank == above + 1, "position " << p);
    BOOST_REQUIRE_EQUAL(e.top.size(), 3u);
    std::vector<std::size_t> order(row.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::partial_sort(order.begin(), order.begin() + 4, order.end(), [&](auto a, auto b) { return row[a] > row[b]; });
    for (std::size_t k = 0; k < 3; ++k) {
      BOOST_TEST(std::abs(e.top[k].logprob - log_softmax(order[k])) < 1e-3, "position " << p << " top " << k);
      if (row[order[k]] - row[order[k + 1]] > 1e-3 && (k == 0 || row[order[k - 1]] - row[order[k]] > 1e-3))
        BOOST_TEST(std::size_t(e.top[k].token) == order[k], "position " << p << " top " << k);
    }
  }
}

// The f32 Llama fixture with HF transformers' reference, and shards over its weights that
// project a prompt's rows `rows` at a time.
struct GoldenFixture {
  testing::Reference ref = testing::load_reference("llama.reference.json");
  std::shared_ptr<const kernels::cpu::ModelWeights> weights =
      std::make_shared<kernels::cpu::ModelWeights>(testing::load_model("llama").weights);
  std::vector<kv::TokenId> prompt{ref.prompt.begin(), ref.prompt.end()};
  std::uint32_t n = static_cast<std::uint32_t>(prompt.size());
  shard::CpuShard sliced(std::uint32_t device_blocks, std::int64_t rows) const {
    shard::CpuShardOptions o{4, device_blocks, 8};
    o.prompt_rows_per_slice = rows;
    return shard::CpuShard(weights, o);
  }
};

// The f32 Llama fixture and HF transformers' logits at every prompt position: the prompt's
// log-probabilities, computed over three chunks in a batch with another sequence, are the
// log-softmax of those logits (float weights: logits within 1e-4, the BLAS shapes' rounding).
// The shard projects the prompt's rows 3 at a time, so slices end inside chunks.
BOOST_FIXTURE_TEST_CASE(prompt_log_probabilities_over_a_chunked_prefill_are_transformers_log_softmax, GoldenFixture) {
  shard::CpuShard s = sliced(32, 3);
  shard::CpuShard alone(weights, {4, 32, 8});
  shard::SamplingParams asks = greedy();
  asks.prompt_logprobs = 3;
  const std::vector<std::uint32_t> ends{7, 16, n};
  std::vector<shard::PromptLogprob> got;
  kv::TokenId sampled = -1;
  for (std::size_t c = 0; c < ends.size(); ++c) {
    shard::Step step = step_of(c + 1);
    shard::SeqWork w;
    w.seq = 1;
    if (c == 0) {
      step.added.push_back({1, 1, 0, n, prompt, asks});
      w.table_blocks = testing::shuffled_table(16, 4, n, 7);
    } else {
      w.table_first = (n + 3) / 4;  // unchanged
    }
    w.begin = c == 0 ? 0 : ends[c - 1];
    w.end = ends[c];
    w.num_samples = c + 1 == ends.size() ? 1 : 0;
    // Another sequence in the batch, sampled in each step, before the chunk.
    shard::Step other = step_of(c + 1);
    prefill(step, 10 + c, {5, 9, 200, 17, 3}, {static_cast<kv::BlockId>(16 + 2 * c), static_cast<kv::BlockId>(17 + 2 * c)});
    prefill(other, 10 + c, {5, 9, 200, 17, 3}, {static_cast<kv::BlockId>(16 + 2 * c), static_cast<kv::BlockId>(17 + 2 * c)});
    step.seqs.push_back(w);
    const auto r = s.execute(step);
    const auto expected = alone.execute(other);
    BOOST_REQUIRE_EQUAL(r.tokens.size(), w.num_samples + 1);
    BOOST_TEST(r.tokens.front().token == expected.tokens.at(0).token);
    BOOST_TEST(std::abs(r.tokens.front().logprob - expected.tokens.at(0).logprob) < 1e-4);
    if (w.num_samples) sampled = r.tokens.back().token;
    got.insert(got.end(), r.prompt_logprobs.begin(), r.prompt_logprobs.end());
  }
  BOOST_TEST(sampled == ref.greedy.at(0));
  expect_transformers_scores(got, 1, ref, n - 1);
}

// One step, three sequences of the reference prompt projected 5 rows at a time. The first's
// prompt is 12 tokens shorter than what it computes (a recomputed sequence: its last rows are
// generated tokens), so whole slices of its rows score nothing before the next sequence's
// start; the other two score their whole prompt, and slices span the end of one and the start
// of the next.
BOOST_FIXTURE_TEST_CASE(prompt_log_probabilities_of_several_sequences_in_one_step_are_each_transformers, GoldenFixture) {
  shard::CpuShard s = sliced(96, 5);
  BOOST_REQUIRE_GT(n, 14u);
  shard::SamplingParams asks = greedy();
  asks.prompt_logprobs = 3;
  shard::Step step = step_of(1);
  const std::uint32_t blocks = (n + 3) / 4;
  for (kv::SeqId q = 1; q <= 3; ++q) {
    const std::uint32_t prompt_len = q == 1 ? n - 12 : n;
    step.added.push_back({q, q, 0, prompt_len, prompt, asks});
    shard::SeqWork& w = step.seqs.emplace_back();
    w.seq = q;
    w.end = n;
    w.num_samples = 1;
    for (std::uint32_t b = 0; b < blocks; ++b) w.table_blocks.push_back((q - 1) * blocks + b);
  }
  const auto r = s.execute(step);
  BOOST_REQUIRE_EQUAL(r.tokens.size(), 3u);
  for (const auto& t : r.tokens) BOOST_TEST(t.token == ref.greedy.at(0));
  for (kv::SeqId q = 1; q <= 3; ++q) {
    std::vector<shard::PromptLogprob> mine;
    for (const auto& e : r.prompt_logprobs)
      if (e.seq == q) mine.push_back(e);
    expect_transformers_scores(mine, q, ref, q == 1 ? n - 13 : n - 1);
  }
}

BOOST_FIXTURE_TEST_CASE(a_copied_block_continues_the_sequence_like_the_original, Fixture) {
  auto s = make();
  shard::Step p = step_of(1);
  prefill(p, 1, {1, 2, 3, 4, 5, 6}, {0, 1});  // block 1 half full
  const auto first = s.execute(p).tokens.at(0).token;

  // Sequence 2, a fork, shares block 0 and gets a copy of block 1 (copy-on-write) as block 7.
  shard::Step d = step_of(2);
  d.copies.push_back({1, 7});
  d.seqs.push_back(decode(1, first, 6, 2, {}));
  d.added.push_back({2, 2, 0, 6, {1, 2, 3, 4, 5, 6, first}, greedy()});
  auto b = decode(2, -1, 6, 0, {0, 7});  // its tokens came whole: nothing appended
  d.seqs.push_back(b);
  const auto r = s.execute(d);
  BOOST_REQUIRE_EQUAL(r.tokens.size(), 2u);
  BOOST_TEST(r.tokens[0].token == r.tokens[1].token);
  BOOST_TEST(r.tokens[0].logprob == r.tokens[1].logprob);
}

BOOST_FIXTURE_TEST_CASE(a_sequence_swapped_out_and_in_elsewhere_decodes_as_if_never_moved, Fixture) {
  auto stay = make(), moved = make();
  shard::Step p = step_of(1);
  prefill(p, 1, {7, 8, 9, 10, 11, 12, 13}, {3, 5});
  const auto t1 = stay.execute(p).tokens.at(0).token;
  BOOST_TEST(moved.execute(p).tokens.at(0).token == t1);

  shard::Step out = step_of(2);  // device blocks 3, 5 -> host 6, 0
  out.swap_out = {{3, 6}, {5, 0}};
  moved.execute(out);
  shard::Step scribble = step_of(3);  // reuse the freed device blocks for something else
  prefill(scribble, 2, {100, 101, 102, 103, 104, 105, 106}, {5, 3});
  moved.execute(scribble);

  auto next = [&](shard::CpuShard& s, std::vector<kv::BlockId> table, std::vector<kv::BlockMove> swap_in) {
    shard::Step d = step_of(4);
    d.swap_in = std::move(swap_in);
    d.seqs.push_back(decode(1, t1, 7, 0, std::move(table)));  // a swapped-in table comes whole
    return s.execute(d).tokens.at(0);
  };
  const auto a = next(stay, {3, 5}, {});
  const auto b = next(moved, {9, 12}, {{6, 9}, {0, 12}});  // back in, to other device blocks
  BOOST_TEST(a.token == b.token);
  BOOST_TEST(a.logprob == b.logprob);
}

BOOST_FIXTURE_TEST_CASE(steps_the_shard_cannot_run_are_refused, Fixture) {
  auto refused = [&](auto edit) {
    auto s = make();
    shard::Step step = step_of(1);
    prefill(step, 1, {1, 2}, {0});
    edit(step);
    BOOST_CHECK_THROW(s.execute(step), std::invalid_argument);
  };
  refused([](shard::Step& st) { st.block_size = 8; });                    // the cache uses 4
  refused([](shard::Step& st) { st.added[0].tokens = {1, 999}; });        // outside the vocabulary of 256
  refused([](shard::Step& st) {                                           // the table covers 4 positions, not 5
    st.added[0].tokens = {1, 2, 3, 4, 5};
    st.added[0].prompt_len = 5;
    st.seqs[0].end = 5;
  });
  refused([](shard::Step& st) { st.seqs[0].table_blocks = {40}; });       // block outside the cache of 32
  refused([](shard::Step& st) { st.seqs[0].end = 3; });                   // positions past its tokens
  refused([](shard::Step& st) { st.added.clear(); });                     // a sequence never added
  refused([](shard::Step& st) { st.seqs[0].table_first = 1; });           // a table delta past the end
  refused([](shard::Step& st) {
    st.seqs.clear();
    st.copies.push_back({0, 32});
  });
}

BOOST_FIXTURE_TEST_CASE(a_dropped_sequence_is_forgotten_and_can_be_added_again, Fixture) {
  auto s = make();
  shard::Step p = step_of(1);
  prefill(p, 1, {1, 2, 3}, {0});
  const auto first = s.execute(p).tokens.at(0).token;
  BOOST_TEST(s.sequences().size() == 1u);
  shard::Step gone = step_of(2);
  gone.dropped = {1};
  gone.seqs.push_back(decode(1, first, 3, 1, {}));
  BOOST_CHECK_THROW(s.execute(gone), std::invalid_argument);
  BOOST_TEST(s.sequences().size() == 0u);
  // Recomputed after preemption: back whole, with its generated token, to other blocks.
  shard::Step back = step_of(3);
  back.added.push_back({1, 1, 0, 3, {1, 2, 3, first}, greedy()});
  auto w = decode(1, -1, 0, 0, {5});
  w.end = 4;
  back.seqs.push_back(w);
  shard::CpuShard fresh = make();
  shard::Step again = step_of(1);
  prefill(again, 1, {1, 2, 3}, {0});
  fresh.execute(again);
  shard::Step next = step_of(2);
  next.seqs.push_back(decode(1, first, 3, 1, {}));
  BOOST_TEST(s.execute(back).tokens.at(0).token == fresh.execute(next).tokens.at(0).token);
}

namespace {

const std::vector<kv::TokenId> kPrompt = {5, 9, 200, 17, 3, 88};

// The greedy token and the log-probability of every token of the vocabulary (256) at the
// prompt's end, under `sampling` (greedy, all logprobs).
struct Row {
  kv::TokenId token = -1;
  std::vector<float> logprob;  // [256]
};
Row row_under(const Fixture& f, shard::SamplingParams sampling) {
  auto s = f.make();
  sampling.temperature = 0.0f;
  sampling.logprobs = true;
  sampling.top_logprobs = 256;
  shard::Step step = step_of(1);
  prefill(step, 1, kPrompt, {6, 2}, sampling);
  const auto t = s.execute(step).tokens.at(0);
  Row r{t.token, std::vector<float>(256, -std::numeric_limits<float>::infinity())};
  for (const auto& top : t.top) r.logprob.at(static_cast<std::size_t>(top.token)) = top.logprob;
  return r;
}

bool in_prompt(kv::TokenId t) { return std::find(kPrompt.begin(), kPrompt.end(), t) != kPrompt.end(); }

}  // namespace

BOOST_FIXTURE_TEST_CASE(logit_bias_shifts_its_tokens_and_minus_100_bans_the_greedy_one, Fixture) {
  const Row plain = row_under(*this, {});
  shard::SamplingParams biased;
  biased.logit_bias = {{plain.token, -100.0f}, {40, 3.0f}};
  const Row r = row_under(*this, biased);
  BOOST_TEST(r.token != plain.token);
  const kv::TokenId other = plain.token == 41 ? 42 : 41;  // an unbiased reference token
  const auto shift = [&](const Row& x, kv::TokenId t) { return x.logprob[std::size_t(t)] - x.logprob[std::size_t(other)]; };
  BOOST_TEST(shift(r, 40) - shift(plain, 40) == 3.0f, boost::test_tools::tolerance(1e-3f));
  BOOST_TEST(shift(r, plain.token) - shift(plain, plain.token) == -100.0f, boost::test_tools::tolerance(1e-3f));
}

BOOST_FIXTURE_TEST_CASE(repetition_penalty_lowers_the_prompt_tokens_and_no_other, Fixture) {
  const Row plain = row_under(*this, {});
  shard::SamplingParams penalised;
  penalised.repetition_penalty = 2.0f;
  const Row r = row_under(*this, penalised);
  const kv::TokenId ref = 100;  // not in the prompt
  BOOST_REQUIRE(!in_prompt(ref));
  for (kv::TokenId t = 0; t < 256; ++t) {
    const float before = plain.logprob[std::size_t(t)] - plain.logprob[std::size_t(ref)];
    const float after = r.logprob[std::size_t(t)] - r.logprob[std::size_t(ref)];
    if (in_prompt(t)) BOOST_TEST(after < before, "prompt token " << t);
    else BOOST_TEST(after == before, boost::test_tools::tolerance(1e-3f));
  }
}

BOOST_FIXTURE_TEST_CASE(min_tokens_masks_its_stop_ids_until_that_many_tokens_are_generated, Fixture) {
  const Row plain = row_under(*this, {});
  shard::SamplingParams sampling;
  sampling.min_tokens_stop_ids = {plain.token};
  BOOST_TEST(row_under(*this, sampling).token == plain.token);  // min_tokens 0: nothing masked
  sampling.min_tokens = 1;
  const Row masked = row_under(*this, sampling);
  BOOST_TEST(masked.token != plain.token);
  BOOST_TEST(std::isinf(masked.logprob[std::size_t(plain.token)]));
  // With one token generated the mask is lifted: the stop id has a finite log-probability again.
  auto s = make();
  sampling.logprobs = true;
  sampling.top_logprobs = 256;
  sampling.temperature = 0.0f;
  shard::Step p = step_of(1);
  prefill(p, 1, kPrompt, {6, 2}, sampling);
  const auto first = s.execute(p).tokens.at(0);
  shard::Step d = step_of(2);
  d.seqs.push_back(decode(1, first.token, 6, 2, {}));
  const auto second = s.execute(d).tokens.at(0);
  const auto logprob_of = [&](const shard::SampledToken& t) {
    for (const auto& top : t.top)
      if (top.token == plain.token) return top.logprob;
    return -std::numeric_limits<float>::infinity();
  };
  BOOST_TEST(std::isinf(logprob_of(first)));
  BOOST_TEST(std::isfinite(logprob_of(second)));
}

// Rank 0 samples a step's rows on the forward's threads: each row's draw, log-probabilities and
// top list are those it gets in a step of its own on a one-thread shard, whatever its sampling
// parameters; a row that cannot be sampled refuses the step (the actor's error reply).
BOOST_FIXTURE_TEST_CASE(rows_sampled_on_the_pool_equal_each_row_sampled_alone, Fixture) {
  std::vector<shard::SamplingParams> kinds;
  for (int k = 0; k < 7; ++k) {
    shard::SamplingParams p;
    p.temperature = k % 2 == 0 ? 0.0f : 0.9f;
    p.seed = 1000 + static_cast<std::uint64_t>(k);
    p.logprobs = k % 3 == 0;
    p.top_logprobs = p.logprobs ? 3 : 0;
    if (k == 2) p.repetition_penalty = 1.3f;
    if (k == 3) p.logit_bias = {{7, 5.0f}, {11, -100.0f}};
    if (k == 5) p.top_k = 20;
    if (k == 6) p.frequency_penalty = 0.5f;
    kinds.push_back(p);
  }
  const std::vector<std::vector<kv::TokenId>> prompts = {
      {5, 9, 200, 17}, {3, 88}, {7, 7, 7, 11, 7}, {1}, {42, 43, 44}, {250, 3, 9}, {17, 17, 5, 6}};
  const auto table = [](std::size_t i) { return std::vector<kv::BlockId>{static_cast<kv::BlockId>(2 * i), static_cast<kv::BlockId>(2 * i + 1)}; };

  shard::CpuShard pooled(weights, {4, 32, 8, 2});
  shard::Step step = step_of(1);
  for (std::size_t i = 0; i < prompts.size(); ++i) prefill(step, i + 1, prompts[i], table(i), kinds[i]);
  step.seqs.back().num_samples = 2;  // two samples from one row
  const auto together = pooled.execute(step);
  BOOST_REQUIRE_EQUAL(together.tokens.size(), prompts.size() + 1);

  std::size_t at = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    auto alone = shard::CpuShard(weights, {4, 32, 8, 1});
    shard::Step one = step_of(1);
    prefill(one, i + 1, prompts[i], table(i), kinds[i]);
    one.seqs.back().num_samples = step.seqs[i].num_samples;
    const auto r = alone.execute(one);
    for (const auto& t : r.tokens) {
      const auto& u = together.tokens.at(at++);
      BOOST_TEST(u.seq == t.seq);
      BOOST_TEST(u.token == t.token);
      BOOST_TEST(u.logprob == t.logprob);
      BOOST_REQUIRE_EQUAL(u.top.size(), t.top.size());
      for (std::size_t j = 0; j < t.top.size(); ++j) {
        BOOST_TEST(u.top[j].token == t.top[j].token);
        BOOST_TEST(u.top[j].logprob == t.top[j].logprob);
      }
    }
  }
  BOOST_TEST(at == together.tokens.size());

  shard::CpuShard refused(weights, {4, 32, 8, 2});
  shard::Step bad = step_of(1);
  for (std::size_t i = 0; i < prompts.size(); ++i) prefill(bad, i + 1, prompts[i], table(i), kinds[i]);
  bad.added[4].sampling.top_p = 0.0f;  // outside (0, 1]
  BOOST_CHECK_EXCEPTION(refused.execute(bad), std::invalid_argument, [](const std::invalid_argument& e) {
    return std::string(e.what()).find("top_p") != std::string::npos;
  });
}

BOOST_FIXTURE_TEST_CASE(a_step_one_stage_cannot_run_is_refused_by_every_stage_before_the_hand_over, Fixture) {
  config::Config cfg;
  cfg.engine.backend = config::Backend::cpu;
  cfg.engine.pipeline_parallel_degree = 2;
  cfg.model.path = std::string(ACTORLM_MODEL_FIXTURES) + "/llama.gguf";
  cfg.model.max_model_len = 64;
  cfg.cache.block_size = 4;
  cfg.cache.num_gpu_blocks_override = 32;
  cfg.cache.swap_space = 0.001;
  std::vector<std::unique_ptr<shard::CpuShard>> stages;
  shard::load_cpu_shards(cfg, stages);
  BOOST_TEST_REQUIRE(stages.size() == 2u);
  // Runs `step` on both stages at once, as their actors would; what each threw.
  const auto run = [&](const shard::Step& step, std::vector<shard::StepResult>& results) {
    std::vector<std::exception_ptr> errors(2);
    results.assign(2, {});
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < 2; ++i)
      threads.emplace_back([&, i] {
        try {
          results[i] = stages[i]->execute(step);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    return errors;
  };
  // A block id outside the 32-block cache: only the cache can tell (the sequence state takes it).
  shard::Step bad = step_of(1);
  prefill(bad, 1, {5, 9, 200, 17, 3, 88}, {6, 99});
  std::vector<shard::StepResult> results;
  const auto start = std::chrono::steady_clock::now();
  const auto errors = run(bad, results);
  // Both refuse at once: neither waits out the hand-over's timeout (70 s here).
  BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::seconds(10)));
  for (const auto& e : errors) BOOST_CHECK_THROW(std::rethrow_exception(e), std::invalid_argument);
  // The group is intact: the next step runs on both and the last stage answers as one rank does.
  shard::Step good = step_of(2);
  prefill(good, 2, {5, 9, 200, 17, 3, 88}, {6, 2});
  const auto ok = run(good, results);
  BOOST_TEST(!ok[0]);
  BOOST_TEST(!ok[1]);
  auto one = make();
  const auto expected = one.execute(good);
  BOOST_TEST(results[0].tokens.empty());  // the first stage samples nothing
  BOOST_TEST_REQUIRE(results[1].tokens.size() == 1u);
  BOOST_TEST(results[1].tokens[0].token == expected.tokens.at(0).token);
}

// A prompt's rows are projected in slices of at most 64 MiB of logits and at most 256 rows.
BOOST_AUTO_TEST_CASE(prompt_rows_are_projected_in_slices_of_at_most_64_mib) {
  BOOST_TEST(shard::prompt_rows_per_slice(49152) == 256);   // SmolLM2: 48 MiB
  BOOST_TEST(shard::prompt_rows_per_slice(128256) == 130);  // Llama 3: 63.6 MiB
  BOOST_TEST(shard::prompt_rows_per_slice(1) == 256);
  BOOST_TEST(shard::prompt_rows_per_slice(std::size_t{1} << 25) == 1);  // a row above 64 MiB: still one
  for (std::size_t vocab : {32000u, 65536u, 151936u, 256000u})
    BOOST_TEST(shard::prompt_rows_per_slice(vocab) * vocab * sizeof(float) <= std::size_t{64} << 20);
}
