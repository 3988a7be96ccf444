// Property tests of the scheduler policy over many seeds, in all three regimes: random
// arrivals, lengths, priorities, n, aborts and tight block budgets.
#define BOOST_TEST_MODULE scheduler_properties
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "tests/actors/scheduler/scheduler_harness.hpp"

#include <limits>
#include <string>
#include <ostream>

using namespace actorlm;
using namespace actorlm::scheduler;
using namespace actorlm::scheduler::testing;
namespace bdata = boost::unit_test::data;

namespace {

struct Regime {
  const char* name;
  config::Batching batching;
  config::Preemption preemption;
  bool chunked;
};
std::ostream& operator<<(std::ostream& os, const Regime& r) { return os << r.name; }

const Regime regimes[] = {
    {"paged_recompute", config::Batching::paged, config::Preemption::recompute, false},
    {"paged_swap", config::Batching::paged, config::Preemption::swap, false},
    {"paged_auto_chunked", config::Batching::paged, config::Preemption::automatic, true},
    {"continuous", config::Batching::continuous, config::Preemption::recompute, false},
    {"dynamic", config::Batching::dynamic, config::Preemption::recompute, false},
};

SchedulerOptions options_for(const Regime& r) {
  SchedulerOptions o;
  o.batching = r.batching;
  o.preemption = r.preemption;
  o.chunked_prefill = r.chunked;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = r.chunked ? 24 : 64;
  o.batch_size = 3;
  o.max_batch_delay = 5'000'000;
  o.max_queue_len = 64;
  o.max_model_len = 64;
  o.block_size = 4;
  o.num_device_blocks = r.batching == config::Batching::paged ? 28 : 64;
  o.num_host_blocks = 32;
  o.watermark = 0.05;
  o.aging_per_s = 20;
  o.recompute_s_per_token = 1e-4;
  o.swap_s_per_block = 1e-4;  // auto: swap when blocks * 2 < tokens
  return o;
}

Coverage run(const Regime& regime, unsigned seed) {
  Harness h(options_for(regime));
  std::mt19937_64 rng(seed);
  auto uni = [&](std::uint32_t lo, std::uint32_t hi) {
    return std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng);
  };
  constexpr RequestId num_requests = 150;
  std::vector<Time> arrivals;
  Time t = 0;
  for (RequestId i = 0; i < num_requests; ++i) arrivals.push_back(t += uni(0, 3'000'000));
  std::vector<RequestId> aborted;
  RequestId next = 0;
  std::uint64_t guard = 0;
  while (next < num_requests || h.scheduler().has_work()) {
    BOOST_REQUIRE_MESSAGE(++guard < 20000, "no progress: a request starves or the loop hangs");
    while (next < num_requests && arrivals[next] <= h.now()) {
      RequestSpec spec;
      spec.id = next + 1;
      spec.prompt.resize(uni(1, 30));
      for (auto& tok : spec.prompt) tok = TokenId(uni(200, 260));
      // A third start with some of a common "system prompt", so first admissions hit the prefix
      // cache too (readmissions after a recompute hit their own blocks).
      if (uni(0, 2) == 0)
        for (std::uint32_t k = 0, shared = uni(1, 16); k < shared && k < spec.prompt.size(); ++k) spec.prompt[k] = TokenId(300 + k);
      spec.max_tokens = uni(1, 24);
      spec.n = uni(0, 4) == 0 ? uni(2, 3) : 1;
      spec.priority = std::int32_t(uni(0, 3));
      spec.stop_token_ids = {stop_token};
      if (spec.id % 5 == 0) spec.sampling.prompt_logprobs = 2;  // computed whole, never from the cache
      const auto st = h.submit(spec);
      BOOST_REQUIRE(st == SubmitStatus::accepted || st == SubmitStatus::queue_full);
      ++next;
    }
    if (uni(0, 40) == 0 && !h.specs().empty()) {  // abort a random live request
      auto it = h.specs().begin();
      std::advance(it, uni(0, std::uint32_t(h.specs().size() - 1)));
      // Between steps, or while the reservation of the next step is out.
      if (uni(0, 1) == 0) h.abort(it->first);
      else h.abort_during_next_reservation(it->first);
      aborted.push_back(it->first);
    }
    if (!h.step()) {  // idle: jump to the next arrival or the dynamic regime's deadline
      Time wake = next < num_requests ? arrivals[next] : std::numeric_limits<Time>::max();
      if (auto w = h.scheduler().next_wakeup()) wake = std::min(wake, *w);
      const auto c = h.scheduler().counts();
      const auto kv = h.block_manager().stats();
      BOOST_REQUIRE_MESSAGE(wake != std::numeric_limits<Time>::max(),
                            "requests wait but nothing can run and nothing will wake them: waiting "
                                << c.waiting << " running " << c.running << " swapped " << c.swapped
                                << "; kv used " << kv.device_used << " free " << kv.device_free
                                << " cached " << kv.device_cached << " host used " << kv.host_used
                                << " seqs " << kv.num_sequences);
      h.advance_to(wake);
    }
  }
  h.drain_frees();
  const auto stats = h.block_manager().stats();
  BOOST_TEST(stats.device_used == 0u);
  BOOST_TEST(stats.host_used == 0u);
  BOOST_TEST(stats.num_sequences == 0u);
  for (const auto& [id, o] : h.outcomes()) {
    const bool was_aborted = std::find(aborted.begin(), aborted.end(), id) != aborted.end();
    for (std::uint32_t j = 0; j < o.tokens.size(); ++j) {
      BOOST_REQUIRE_MESSAGE(o.finishes[j] == 1, "request " << id << " sample " << j << " finished "
                                                            << o.finishes[j] << " times");
      const auto want = h.expected(id, j);
      if (o.reasons[j] == FinishReason::abort) {
        BOOST_REQUIRE(was_aborted);
        BOOST_REQUIRE(o.tokens[j].size() <= want.size());
        BOOST_REQUIRE(std::equal(o.tokens[j].begin(), o.tokens[j].end(), want.begin()));
      } else {
        BOOST_REQUIRE_MESSAGE(o.tokens[j] == want, "request " << id << " sample " << j
                                                               << " produced other tokens");
        const bool stopped = want.back() == stop_token;
        BOOST_REQUIRE(o.reasons[j] == (stopped ? FinishReason::stop : FinishReason::length));
      }
    }
  }
  auto cov = h.coverage();
  BOOST_TEST_MESSAGE(regime.name << " seed " << seed << ": preemptions "
                     << h.scheduler().counts().preemptions << " swap-outs " << cov.swap_outs
                     << " copies " << cov.copies << " prefix hits " << cov.prefix_hits << " forks "
                     << cov.forks << " chunks " << cov.chunks << " padding " << cov.padding_rows
                     << " no-room " << cov.no_room << " steps " << h.steps());
  return cov;
}

}  // namespace

BOOST_DATA_TEST_CASE(every_request_finishes_once_with_exactly_its_tokens,
                     bdata::make(regimes) * bdata::xrange(1, 26), regime, seed) {
  const auto cov = run(regime, seed);
  // Each regime must have exercised what makes it hard, or the properties proved little.
  const std::string name = regime.name;
  if (name == "paged_recompute") {
    BOOST_TEST(cov.prefix_hits > 0u);
    BOOST_TEST(cov.cached_reported > 0u);  // and the requests' tokens say so
  }
  if (name == "paged_swap") BOOST_TEST(cov.swap_outs > 0u);
  if (name == "paged_auto_chunked") BOOST_TEST(cov.chunks > 0u);
  if (name == "continuous") BOOST_TEST(cov.copies > 0u);  // reserved forks copy
  if (name == "dynamic") BOOST_TEST(cov.padding_rows > 0u);
  BOOST_TEST(cov.forks > 0u);
  BOOST_TEST(cov.prompt_logprobs > 0u);
}
