// When a sample ends: stop tokens and the EOS only after min_tokens tokens, the EOS not at all
// under ignore_eos, and the min_tokens mask the shards get; against the scripted model.
#define BOOST_TEST_MODULE scheduler_stops
#include <boost/test/unit_test.hpp>

#include "tests/actors/scheduler/scheduler_harness.hpp"

using namespace actorlm;
using namespace actorlm::scheduler;
using namespace actorlm::scheduler::testing;

namespace {

constexpr std::uint32_t kPrompt = 4;

SchedulerOptions options() {
  SchedulerOptions o;
  o.batching = config::Batching::paged;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 256;
  o.max_model_len = 128;
  o.block_size = 4;
  o.num_device_blocks = 64;
  o.watermark = 0;
  o.vocab_size = 1000;
  return o;
}

// A request whose scripted output's first and third tokens are its stop tokens.
RequestSpec stopping_request(RequestId id, std::uint32_t max_tokens) {
  RequestSpec s;
  s.id = id;
  s.prompt.assign(kPrompt, TokenId(300 + id));
  s.max_tokens = max_tokens;
  s.stop_token_ids = {scripted_token(id, 0, kPrompt), scripted_token(id, 0, kPrompt + 2)};
  return s;
}

std::vector<TokenId> run(RequestSpec s, FinishReason* reason = nullptr) {
  Harness h(options());
  const auto id = s.id;
  BOOST_REQUIRE((h.submit(std::move(s)) == SubmitStatus::accepted));
  while (h.step()) {}
  if (reason) *reason = h.outcomes().at(id).reasons[0];
  return h.outcomes().at(id).tokens[0];
}

// The scripted output when only tokens after the first `min_tokens` may stop it.
std::size_t expected_length(const RequestSpec& s, const std::vector<TokenId>& stops) {
  for (std::uint32_t k = 1; k <= s.max_tokens; ++k) {
    const TokenId t = scripted_token(s.id, 0, kPrompt + k - 1);
    if (k > s.min_tokens && std::find(stops.begin(), stops.end(), t) != stops.end()) return k;
  }
  return s.max_tokens;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_stop_token_ends_the_sample_on_its_first_token_without_min_tokens) {
  FinishReason why{};
  BOOST_TEST(run(stopping_request(1, 12), &why).size() == 1u);
  BOOST_TEST((why == FinishReason::stop));
}

BOOST_AUTO_TEST_CASE(min_tokens_lets_no_stop_token_end_the_sample_before_more_tokens_than_min_tokens) {
  for (std::uint32_t min_tokens : {1u, 2u, 3u, 12u}) {
    auto s = stopping_request(2, 12);
    s.min_tokens = min_tokens;
    const auto want = expected_length(s, s.stop_token_ids);
    BOOST_TEST_CONTEXT("min_tokens " << min_tokens) {
      BOOST_TEST(run(s).size() == want);
      BOOST_TEST((want > min_tokens || want == s.max_tokens));
    }
  }
}

BOOST_AUTO_TEST_CASE(ignore_eos_runs_to_max_tokens_through_the_eos) {
  auto s = stopping_request(3, 10);
  s.eos_token_id = s.stop_token_ids[0];
  s.stop_token_ids.clear();
  FinishReason why{};
  BOOST_TEST(run(s, &why).size() == 1u);  // the EOS ends it
  s.ignore_eos = true;
  BOOST_TEST(run(s, &why).size() == 10u);
  BOOST_TEST((why == FinishReason::length));
}

BOOST_AUTO_TEST_CASE(the_shards_get_every_id_that_could_end_the_sample_to_mask_before_min_tokens) {
  Harness h(options());
  auto s = stopping_request(4, 8);
  s.eos_token_id = 7;
  s.min_tokens = 2;
  s.sampling.min_tokens_stop_ids = {900};  // the caller's own (vLLM masks the EOS under ignore_eos)
  BOOST_REQUIRE((h.submit(s) == SubmitStatus::accepted));
  auto req = h.scheduler().plan(h.now());
  BOOST_REQUIRE(req.has_value());
  const auto step = h.scheduler().on_reserved(kv::apply_reservation(h.block_manager(), *req));
  BOOST_TEST_REQUIRE(step.added.size() == 1u);
  const auto& p = step.added[0].sampling;
  BOOST_TEST(p.min_tokens == 2u);
  std::vector<TokenId> want = {7, 900, s.stop_token_ids[0], s.stop_token_ids[1]};
  std::sort(want.begin(), want.end());
  BOOST_TEST(p.min_tokens_stop_ids == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(refuses_extension_parameters_a_shard_could_not_run) {
  Harness h(options());
  RequestId id = 10;
  const auto refused = [&](auto change) {
    auto r = stopping_request(id++, 4);
    change(r);
    return h.submit(r) == SubmitStatus::invalid;
  };
  BOOST_TEST(refused([](RequestSpec& r) { r.min_tokens = 5; }));  // > max_tokens
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.repetition_penalty = 0.0f; }));
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.repetition_penalty = std::nanf(""); }));
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.logit_bias = {{1000, 1.0f}}; }));  // outside the vocabulary
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.logit_bias = {{3, 101.0f}}; }));
  BOOST_TEST(refused([](RequestSpec& r) {  // every token masked: nothing left to draw
    r.min_tokens = 1;
    for (TokenId t = 0; t < 1000; ++t) r.stop_token_ids.push_back(t);
  }));
  auto ok = stopping_request(id++, 4);
  ok.min_tokens = 4;
  ok.sampling.repetition_penalty = 1.2f;
  ok.sampling.logit_bias = {{999, -100.0f}};
  BOOST_TEST((h.submit(ok) == SubmitStatus::accepted));
}
