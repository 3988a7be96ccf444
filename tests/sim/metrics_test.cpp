// summarize(): exact summaries of tiny hand-computed runs, the percentile definition, goodput,
// Little's law on random records, and the bounded time series.
#define BOOST_TEST_MODULE sim_metrics
#include "sim/metrics.hpp"
#include "tests/sim/tiny_run.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace actorlm::sim;
using actorlm::scheduler::StepRecord;

using namespace actorlm::sim::testing;

BOOST_AUTO_TEST_CASE(percentiles_are_nearest_rank) {
  const std::vector<double> ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  BOOST_TEST(percentile(ten, 50) == 5.0);
  BOOST_TEST(percentile(ten, 90) == 9.0);
  BOOST_TEST(percentile(ten, 91) == 10.0);
  BOOST_TEST(percentile(ten, 99) == 10.0);
  BOOST_TEST(percentile(ten, 0) == 1.0);
  BOOST_TEST(percentile(ten, 100) == 10.0);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  BOOST_TEST(percentile(hundred, 99) == 99.0);
  BOOST_TEST(percentile(hundred, 29) == 29.0);  // 0.29 * 100 is 28.999...: ceil must not see it
  BOOST_TEST(percentile(std::vector<double>{}, 50) == 0.0);
  const Stats st = stats_of({3, 1, 2});
  BOOST_TEST(st.count == 3u);
  BOOST_TEST(st.mean == 2.0);
  BOOST_TEST(st.p50 == 2.0);
  BOOST_TEST(st.p90 == 3.0);
  BOOST_TEST(st.max == 3.0);
}

BOOST_AUTO_TEST_CASE(a_tiny_run_is_summarized_exactly) {
  const auto requests = tiny_run();
  const auto steps = tiny_steps();
  const Summary sum = summarize(requests, steps);
  BOOST_TEST(sum.requests == 3u);
  BOOST_TEST(sum.completed == 2u);
  BOOST_TEST(sum.failed == 1u);
  BOOST_TEST(sum.duration_s == 3.0);  // first arrival 0 to last finish 3 s
  BOOST_TEST(sum.input_tokens == 30u);
  BOOST_TEST(sum.output_tokens == 6u);
  BOOST_TEST(sum.output_tokens_per_s == 2.0);
  BOOST_TEST(sum.requests_per_s == 2.0 / 3.0);
  BOOST_TEST(sum.ttft_s.count == 2u);
  BOOST_TEST(sum.ttft_s.mean == 1.0);
  BOOST_TEST(sum.e2e_s.mean == 2.0);
  BOOST_TEST(sum.e2e_s.p50 == 1.0);
  BOOST_TEST(sum.e2e_s.p90 == 3.0);
  BOOST_TEST(sum.e2e_s.max == 3.0);
  BOOST_TEST(sum.tpot_s.count == 1u);  // B has one token: no TPOT
  BOOST_TEST(sum.tpot_s.mean == 0.5);  // (3 - 1) s / 4
  BOOST_TEST(sum.itl_s.count == 4u);
  BOOST_TEST(sum.itl_s.max == 0.5);
  BOOST_TEST(sum.queue_s.count == 2u);
  BOOST_TEST(sum.queue_s.mean == 0.25);
  BOOST_TEST(sum.mean_concurrency == 4.0 / 3.0);  // A for 3 s, B for 1 s, over 3 s
  BOOST_TEST(sum.steps == 2u);
  BOOST_TEST(sum.kv_used_mean == 0.4375);  // (1/4 for 1 s + 1/2 for 3 s) / 4 s
  BOOST_TEST(sum.kv_used_max == 0.5);
  BOOST_TEST(sum.batch_size_mean == 3.0);
  BOOST_TEST(sum.batch_size_max == 4u);
  BOOST_TEST(sum.preemptions == 1u);
  BOOST_TEST_REQUIRE(sum.series.size() == 2u);
  BOOST_TEST(sum.series[1].t_s == 1.0);
  BOOST_TEST(sum.series[1].batch_size == 4.0);
  BOOST_TEST(sum.series[1].kv_used_fraction == 0.5);
}

// The token gaps' percentiles come from a bucketed selection that never gathers every gap: they
// must be exactly the nearest-rank percentiles of all gaps sorted, whatever their spread (one
// value, a few, a wide uniform range, a long tail, spans beyond 2^16 ns and near 2^50 ns, and the
// negative gaps of a broken record).
BOOST_AUTO_TEST_CASE(token_gap_percentiles_equal_those_of_every_gap_sorted) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const int kind = trial % 6;
    auto gap = [&]() -> std::int64_t {
      switch (kind) {
        case 0: return 25'000'000;                                        // one value
        case 1: return 20'000'000 + 1'000'000 * std::int64_t(rng() % 4);  // a few values
        case 2: return std::int64_t(rng() % 5'000'000);                   // a wide uniform range
        case 3: return std::int64_t(std::exp(double(rng() % 2000) / 100.0));  // a long tail
        case 4: return std::int64_t(rng() >> 2);                          // spans near 2^62 (/ 4096 below)
        default: return std::int64_t(rng() % 2001) - 1000;                // a broken record: gaps below 0 too
      }
    };
    std::vector<RequestTiming> requests(1 + rng() % 40);
    std::vector<double> all;  // s, of the completed requests
    std::int64_t sum = 0;
    for (auto& r : requests) {
      r.completed = rng() % 5 != 0;
      r.arrival_ns = 0;
      std::int64_t t = 0;
      const auto tokens = rng() % 60;
      for (std::size_t k = 0; k < tokens; ++k) {
        if (k > 0) {
          const std::int64_t g = kind == 4 ? gap() / 4096 : gap();  // their sum stays below 2^63
          t += g;
          if (r.completed) {
            all.push_back(double(g) / 1e9);
            sum += g;
          }
        }
        r.token_ns.push_back(t);
      }
      r.first_token_ns = r.token_ns.empty() ? -1 : r.token_ns.front();
      r.finished_ns = t;
      r.output_tokens = static_cast<std::uint32_t>(r.token_ns.size());
    }
    const Stats got = summarize(requests, {}).itl_s;
    std::sort(all.begin(), all.end());
    BOOST_TEST_REQUIRE(got.count == all.size(), "trial " << trial);
    if (all.empty()) continue;
    BOOST_TEST(got.p50 == percentile(all, 50), "trial " << trial);
    BOOST_TEST(got.p90 == percentile(all, 90), "trial " << trial);
    BOOST_TEST(got.p99 == percentile(all, 99), "trial " << trial);
    BOOST_TEST(got.max == all.back(), "trial " << trial);
    BOOST_TEST(got.mean == double(sum) / 1e9 / double(all.size()), "trial " << trial);
  }
}

BOOST_AUTO_TEST_CASE(goodput_counts_requests_meeting_every_threshold) {
  const auto requests = tiny_run();
  SummaryOptions options;
  options.slo.ttft_s = 1.0;
  options.slo.tpot_s = 0.4;  // A's 0.5 misses it; B has no TPOT, so only TTFT applies
  Summary sum = summarize(requests, {}, options);
  BOOST_TEST(sum.slo_met == 1u);
  BOOST_TEST(sum.goodput_requests_per_s == 1.0 / 3.0);
  BOOST_TEST(sum.slo_attainment == 1.0 / 3.0);  // the refused request counts against it
  options.slo = Slo{};
  options.slo.e2e_s = 3.0;
  sum = summarize(requests, {}, options);
  BOOST_TEST(sum.slo_met == 2u);
  options.slo.ttft_s = 0.999;
  BOOST_TEST(summarize(requests, {}, options).slo_met == 0u);
  BOOST_TEST(!request_metrics(requests[2], Slo{}).meets_slo);  // refused: never good
}

BOOST_AUTO_TEST_CASE(little_law_holds_on_random_records) {
  std::mt19937_64 rng(2024);
  std::vector<RequestTiming> requests;
  std::int64_t t = 0;
  for (std::uint64_t id = 0; id < 5000; ++id) {
    t += static_cast<std::int64_t>(rng() % (50 * s / 1000));  // up to 50 ms apart
    RequestTiming r;
    r.id = id;
    r.arrival_ns = t;
    r.first_token_ns = t + static_cast<std::int64_t>(rng() % (s / 2));
    r.finished_ns = r.first_token_ns + static_cast<std::int64_t>(rng() % (4 * s));
    r.output_tokens = 1 + static_cast<std::uint32_t>(rng() % 200);
    r.completed = rng() % 20 != 0;  // 5 % refused: outside both sides of the identity
    requests.push_back(r);
  }
  const Summary sum = summarize(requests, {});
  BOOST_TEST(sum.mean_concurrency > 10.0);  // a loaded system, not a trivial one
  BOOST_TEST(sum.mean_concurrency == sum.requests_per_s * sum.e2e_s.mean,
             boost::test_tools::tolerance(0.02));
}

BOOST_AUTO_TEST_CASE(the_time_series_is_bounded_and_keeps_the_shape) {
  std::vector<StepRecord> steps;
  for (std::uint64_t i = 0; i < 10'000; ++i) {
    StepRecord st;
    st.id = i;
    st.start = static_cast<std::int64_t>(i) * 10'000'000;  // 10 ms steps
    st.end = st.start + 10'000'000;
    st.batch_size = i < 5000 ? 8 : 16;
    st.kv_used_blocks = i < 5000 ? 25 : 75;
    st.kv_total_blocks = 100;
    steps.push_back(st);
  }
  SummaryOptions options;
  options.max_series_points = 100;
  const Summary sum = summarize({}, steps, options);
  BOOST_TEST_REQUIRE(sum.series.size() == 100u);
  BOOST_TEST(sum.series.front().t_s == 0.5);  // the middle of the first 1 s bucket
  BOOST_TEST(sum.series.front().batch_size == 8.0);
  BOOST_TEST(sum.series.front().kv_used_fraction == 0.25);
  BOOST_TEST(sum.series.back().batch_size == 16.0);
  BOOST_TEST(sum.series.back().kv_used_fraction == 0.75);
  BOOST_TEST(sum.kv_used_mean == 0.5);
  BOOST_TEST(sum.batch_size_mean == 12.0);
}

BOOST_AUTO_TEST_CASE(an_empty_run_gives_zeros_not_nans) {
  const Summary sum = summarize({}, {});
  BOOST_TEST(sum.duration_s == 0.0);
  BOOST_TEST(sum.output_tokens_per_s == 0.0);
  BOOST_TEST(sum.e2e_s.p99 == 0.0);
  BOOST_TEST(sum.slo_attainment == 0.0);
  BOOST_TEST(sum.series.empty());
}
