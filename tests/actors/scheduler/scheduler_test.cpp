// Behaviour of the scheduler policy in each regime, one property at a time.
#define BOOST_TEST_MODULE scheduler
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "tests/actors/scheduler/scheduler_harness.hpp"

using namespace actorlm;
using namespace actorlm::scheduler;
using namespace actorlm::scheduler::testing;

namespace {

SchedulerOptions base(config::Batching batching) {
  SchedulerOptions o;
  o.batching = batching;
  o.max_num_seqs = 16;
  o.max_num_batched_tokens = 256;
  o.batch_size = 4;
  o.max_batch_delay = 100'000'000;  // 100 ms
  o.max_model_len = 128;
  o.block_size = 4;
  o.num_device_blocks = 64;
  o.num_host_blocks = 0;
  o.watermark = 0;
  o.preemption = config::Preemption::recompute;
  return o;
}

RequestSpec spec(RequestId id, std::uint32_t prompt, std::uint32_t max_tokens, std::int32_t priority = 0) {
  RequestSpec s;
  s.id = id;
  s.prompt.assign(prompt, TokenId(300 + id));
  s.max_tokens = max_tokens;
  s.priority = priority;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(dynamic_batching_waits_no_longer_than_max_batch_delay) {
  Harness h(base(config::Batching::dynamic));
  BOOST_REQUIRE(h.submit(spec(1, 8, 4)) == SubmitStatus::accepted);
  BOOST_TEST(!h.step());  // one request of a batch of 4: wait
  BOOST_REQUIRE(h.scheduler().next_wakeup().has_value());
  BOOST_TEST(*h.scheduler().next_wakeup() == 100'000'000);
  h.advance_to(99'999'999);
  BOOST_TEST(!h.step());
  h.advance_to(100'000'000);
  BOOST_TEST(h.step());  // the delay is up: the batch of one runs
  BOOST_TEST(h.scheduler().counts().running == 1u);
}

BOOST_AUTO_TEST_CASE(dynamic_batching_starts_as_soon_as_the_batch_is_full_and_admits_nobody_meanwhile) {
  Harness h(base(config::Batching::dynamic));
  for (RequestId i = 1; i <= 4; ++i) h.submit(spec(i, 8, 2 + std::uint32_t(i)));
  BOOST_TEST(h.step());
  h.submit(spec(5, 8, 4));
  while (h.outcomes().at(4).finishes[0] == 0) {
    BOOST_REQUIRE(h.step());
    BOOST_TEST(h.scheduler().counts().waiting == 1u);  // request 5 waits for the whole batch
  }
  // Alone in the queue, request 5 now waits for its own batching delay (from its arrival).
  h.step();  // returns the finished batch's blocks
  BOOST_TEST(!h.step());
  BOOST_TEST(h.scheduler().counts().waiting == 1u);
  BOOST_REQUIRE(h.scheduler().next_wakeup().has_value());
  BOOST_TEST(*h.scheduler().next_wakeup() == 1'000'000 + 100'000'000);  // arrived after step 1
}

BOOST_AUTO_TEST_CASE(continuous_batching_admits_a_new_request_at_the_next_step) {
  Harness h(base(config::Batching::continuous));
  h.submit(spec(1, 8, 50));
  BOOST_TEST(h.step());
  BOOST_TEST(h.step());
  h.submit(spec(2, 8, 5));
  BOOST_TEST(h.step());
  BOOST_TEST(h.scheduler().counts().running == 2u);
  BOOST_TEST(h.outcomes().at(2).tokens[0].size() == 1u);  // its prefill ran in that step
}

BOOST_AUTO_TEST_CASE(paged_admits_more_concurrent_requests_than_continuous_for_the_same_memory) {
  std::uint32_t concurrent[2] = {0, 0};
  const config::Batching regimes[2] = {config::Batching::continuous, config::Batching::paged};
  for (int k = 0; k < 2; ++k) {
    Harness h(base(regimes[k]));
    for (RequestId i = 1; i <= 40; ++i) h.submit(spec(i, 8, 100));  // reserved: 27 blocks each
    for (int s = 0; s < 5; ++s) h.step();
    concurrent[k] = h.scheduler().counts().running;
  }
  BOOST_TEST(concurrent[0] == 2u);   // 64 blocks / 27 per reservation
  BOOST_TEST(concurrent[1] == 16u);  // max_num_seqs: 3 blocks each so far
}

BOOST_AUTO_TEST_CASE(refuses_requests_a_shard_could_not_run_as_invalid) {
  auto o = base(config::Batching::paged);
  o.vocab_size = 1000;
  Harness h(o);
  auto s = spec(1, 4, 4);
  BOOST_TEST((h.submit(s) == SubmitStatus::accepted));
  RequestId id = 2;
  const auto refused = [&](auto change) {
    auto r = spec(id++, 4, 4);
    change(r);
    return h.submit(r) == SubmitStatus::invalid;
  };
  BOOST_TEST(refused([](RequestSpec& r) { r.prompt[1] = 1000; }));  // outside the vocabulary
  BOOST_TEST(refused([](RequestSpec& r) { r.prompt[0] = -1; }));
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.top_p = 0.0f; }));
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.top_p = 1.5f; }));
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.temperature = -1.0f; }));
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.temperature = std::nanf(""); }));
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.top_k = -2; }));
  BOOST_TEST(refused([](RequestSpec& r) { r.sampling.min_p = 1.5f; }));
  auto ok = spec(id++, 4, 4);
  ok.prompt[0] = 999;
  ok.sampling.top_p = 0.5f;
  BOOST_TEST((h.submit(ok) == SubmitStatus::accepted));
}

BOOST_AUTO_TEST_CASE(refuses_requests_beyond_max_queue_len_with_a_distinct_status) {
  auto o = base(config::Batching::paged);
  o.max_queue_len = 2;
  Harness h(o);
  BOOST_TEST((h.submit(spec(1, 4, 4)) == SubmitStatus::accepted));
  BOOST_TEST((h.submit(spec(2, 4, 4)) == SubmitStatus::accepted));
  BOOST_TEST((h.submit(spec(3, 4, 4)) == SubmitStatus::queue_full));
  BOOST_TEST((h.submit(spec(4, 200, 4)) == SubmitStatus::too_long));  // over max_model_len
  BOOST_TEST((h.submit(spec(1, 4, 4)) == SubmitStatus::invalid));     // duplicate id
}

BOOST_AUTO_TEST_CASE(runs_lower_priority_values_first_and_fcfs_within_a_priority) {
  auto o = base(config::Batching::paged);
  o.max_num_seqs = 1;
  o.aging_per_s = 0;
  Harness h(o);
  h.submit(spec(1, 4, 1, 5));
  h.submit(spec(2, 4, 1, 0));
  h.submit(spec(3, 4, 1, 0));
  std::vector<RequestId> order;
  while (h.step())
    for (auto& r : h.scheduler().take_finished_records()) order.push_back(r.id);
  BOOST_TEST(order == (std::vector<RequestId>{2, 3, 1}));
}

BOOST_AUTO_TEST_CASE(aging_lets_a_low_priority_request_overtake_a_stream_of_urgent_ones) {
  auto o = base(config::Batching::paged);
  o.max_num_seqs = 1;
  o.aging_per_s = 100;  // one priority level per 10 ms waited
  Harness h(o);
  h.submit(spec(1, 4, 1, 3));
  RequestId next = 2;
  bool low_done = false;
  for (int s = 0; s < 200 && !low_done; ++s) {
    h.submit(spec(next++, 4, 1, 0));  // a new urgent request every step (1 ms)
    h.step();
    for (auto& r : h.scheduler().take_finished_records()) low_done |= r.id == 1;
  }
  BOOST_TEST(low_done);
}

BOOST_AUTO_TEST_CASE(abort_frees_the_blocks_with_the_next_reservation) {
  Harness h(base(config::Batching::paged));
  h.submit(spec(1, 20, 50));
  h.step();
  BOOST_TEST(h.block_manager().stats().device_used == 5u);  // 20 prompt tokens
  h.abort(1);
  BOOST_TEST((h.outcomes().at(1).reasons[0] == FinishReason::abort));
  h.submit(spec(2, 4, 2));
  h.step();  // the frees precede the admission in the same reservation
  BOOST_TEST(!h.block_manager().contains(1));
  BOOST_TEST(h.block_manager().stats().device_used == 1u);
}

// The abort overtakes the reservation's answer: what the block manager allocated for the
// request meanwhile (its admission, its samples' forks) goes back with the next reservation.
BOOST_AUTO_TEST_CASE(a_request_aborted_while_its_admission_is_reserved_leaves_no_block_behind) {
  Harness h(base(config::Batching::paged));
  auto two = spec(1, 20, 50);
  two.n = 2;
  h.submit(two);
  h.abort_during_next_reservation(1);
  h.step();
  BOOST_TEST((h.outcomes().at(1).reasons[0] == FinishReason::abort));
  h.submit(spec(2, 4, 2));
  h.step();
  h.drain_frees();
  BOOST_TEST(!h.block_manager().contains(1));
  BOOST_TEST(h.block_manager().stats().num_sequences == 1u);  // request 2's
  BOOST_TEST(h.block_manager().stats().device_used == 1u);
}

BOOST_AUTO_TEST_CASE(preempts_the_lowest_priority_then_newest_request_when_blocks_run_out) {
  auto o = base(config::Batching::paged);
  o.num_device_blocks = 12;
  Harness h(o);
  h.submit(spec(1, 8, 40, 0));
  h.submit(spec(2, 8, 40, 1));
  h.submit(spec(3, 8, 40, 1));
  h.step();
  for (int s = 0; s < 30 && h.scheduler().counts().preemptions == 0; ++s) h.step();
  BOOST_REQUIRE(h.scheduler().counts().preemptions > 0u);
  // The victim is request 3: priority 1 like request 2, but newer.
  BOOST_TEST(h.outcomes().at(3).tokens[0].size() < h.outcomes().at(2).tokens[0].size());
  BOOST_TEST(h.scheduler().counts().waiting == 1u);
}

BOOST_AUTO_TEST_CASE(n_samples_share_the_prompt_blocks_and_differ_after_it) {
  Harness h(base(config::Batching::paged));
  auto s = spec(1, 16, 8);
  s.n = 3;
  h.submit(s);
  h.step();  // prefill: three first tokens
  h.step();  // forks made (the parent waits for them)
  const auto used = h.block_manager().stats().device_used;
  BOOST_TEST(used == 4u);  // 16 prompt tokens: 4 blocks, shared by all three samples
  while (h.step()) {}
  for (std::uint32_t j = 0; j < 3; ++j) BOOST_TEST(h.outcomes().at(1).tokens[j] == h.expected(1, j));
  BOOST_TEST(h.expected(1, 0) != h.expected(1, 1));
}

namespace {
// Three requests outgrow a 12-block cache; returns the preempted request's state.
SchedulerCounts preempt_under(double recompute_s_per_token, double swap_s_per_block) {
  auto o = base(config::Batching::paged);
  o.num_device_blocks = 12;
  o.num_host_blocks = 16;
  o.preemption = config::Preemption::automatic;
  o.recompute_s_per_token = recompute_s_per_token;
  o.swap_s_per_block = swap_s_per_block;
  Harness h(o);
  for (RequestId id = 1; id <= 3; ++id) h.submit(spec(id, 8, 40));
  for (int s = 0; s < 40 && h.scheduler().counts().preemptions == 0; ++s) h.step();
  return h.scheduler().counts();
}
}  // namespace

BOOST_AUTO_TEST_CASE(auto_preemption_swaps_when_moving_blocks_is_cheaper_than_recomputing) {
  const auto c = preempt_under(1e-3, 1e-6);
  BOOST_REQUIRE(c.preemptions > 0u);
  BOOST_TEST(c.swapped == 1u);
  BOOST_TEST(c.waiting == 0u);
}

BOOST_AUTO_TEST_CASE(auto_preemption_recomputes_when_recomputing_is_cheaper) {
  const auto c = preempt_under(1e-6, 1e-3);
  BOOST_REQUIRE(c.preemptions > 0u);
  BOOST_TEST(c.swapped == 0u);
  BOOST_TEST(c.waiting == 1u);
}

BOOST_AUTO_TEST_CASE(a_step_record_keeps_the_execution_time_its_shard_reported) {
  Harness h(base(config::Batching::continuous));
  BOOST_REQUIRE(h.submit(spec(1, 8, 3)) == SubmitStatus::accepted);
  BOOST_TEST(h.step(2'500'000));
  BOOST_TEST(h.step(700'000));
  const auto records = h.scheduler().take_step_records();
  BOOST_REQUIRE(records.size() == 2u);
  BOOST_TEST(records[0].shard_ns == 2'500'000);
  BOOST_TEST(records[1].shard_ns == 700'000);
  BOOST_TEST(records[1].end - records[1].start == 700'000);  // the harness's clock moves by the step alone
}
