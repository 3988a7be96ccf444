// Failure semantics of the engine's actors on CAF's deterministic test coordinator (virtual
// time): a shard that fails a step, never answers one or answers late; a shard actor or the
// block manager that stops; a block manager that never answers a reservation; and a normal
// shutdown, which must not look like a failure.
#define BOOST_TEST_MODULE engine_failure
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#define CAF_TEST_NO_MAIN
#define FAIL(msg) BOOST_FAIL(msg)
#include <caf/test/dsl.hpp>
#include <caf/test/unit_test_impl.hpp>

#include "actors/engine/engine.hpp"
#include "actors/kv/block_manager_actor.hpp"
#include "actors/scheduler/scheduler_actor.hpp"
#include "tests/actors/engine/faulty_components.hpp"

#include <random>

namespace actorlm::config {
// For Boost.Test's log of a data case.
inline std::ostream& operator<<(std::ostream& out, Batching b) { return out << to_string(b); }
}  // namespace actorlm::config

using namespace actorlm;
using namespace actorlm::scheduler;
using actorlm::testing::FaultPlan;
using actorlm::scheduler::testing::stop_token;

namespace {

struct Received {
  std::map<std::uint32_t, std::vector<TokenId>> tokens;  // by sample
  std::map<std::uint32_t, std::vector<FinishReason>> finishes;
  std::string error;  // SinkBatch::error of its failed samples
};
using SinkLog = std::map<RequestId, Received>;

token_sink::behavior_type collector(token_sink::pointer, SinkLog* log) {
  return {[log](const SinkBatch& b) {
    for (const auto& t : b.tokens) (*log)[t.request].tokens[t.sample].push_back(t.token);
    for (const auto& f : b.finished) {
      (*log)[f.request].finishes[f.sample].push_back(f.reason);
      if (f.reason == FinishReason::error) (*log)[f.request].error = b.error;
    }
  }};
}

struct NetworkConfig : caf::actor_system_config {
  NetworkConfig() {
    kv::add_block_manager_types(*this);
    shard::add_shard_types(*this);
  }
};

config::Config small_config(double step_timeout_s = 1.0) {
  config::Config c;
  c.engine.batching = config::Batching::paged;
  c.engine.step_timeout_s = step_timeout_s;
  c.cache.block_size = 4;
  c.cache.watermark = 0;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_batched_tokens = 128;
  c.scheduler.max_queue_len = 64;
  c.model.max_model_len = 256;
  return c;
}

constexpr std::int64_t step_ns = 2'000'000;  // every scripted step takes 2 ms
constexpr engine::KvCapacity capacity{48, 16, 0};

struct Fixture : test_coordinator_fixture<NetworkConfig> {
  FaultPlan plan;
  SinkLog received;
  engine::EngineActors engine;
  token_sink sink = sys.spawn(collector, &received);

  void start(const config::Config& c) {
    engine = engine::spawn_engine(sys, c, capacity, [this](caf::actor_system& s, std::uint32_t rank, std::uint32_t) {
      return actorlm::testing::spawn_faulty_shard(s, rank, step_ns, &plan);
    });
  }
  ~Fixture() {
    engine::stop_engine(engine);
    run();
  }

  std::int64_t now_ns() { return actorlm::testing::clock_ns(self.ptr()); }

  // The scheduler handles the submission; no timeout fires (virtual time stands still).
  SubmitStatus submit(RequestId id, std::uint32_t prompt, std::uint32_t max_tokens) {
    RequestSpec s;
    s.id = id;
    s.prompt.assign(prompt, TokenId(400 + id % 50));
    s.max_tokens = max_tokens;
    s.stop_token_ids = {stop_token};
    auto rp = self->request(engine.scheduler, caf::infinite, std::move(s), sink);
    consume_messages();
    SubmitStatus status = SubmitStatus::invalid;
    rp.receive([&](SubmitStatus st) { status = st; }, [&](caf::error&) {});
    return status;
  }

  // Runs messages and fires timeouts due at or before `limit_ns` (actor-clock time).
  void run_to(std::int64_t limit_ns) {
    for (;;) {
      consume_messages();
      if (!sched.has_pending_timeout()) return;
      const auto next = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            sched.clock().schedule().begin()->first.time_since_epoch()).count();
      if (next > limit_ns) return;
      sched.trigger_timeout();
    }
  }

  std::vector<TokenId> expected(RequestId id, std::uint32_t prompt, std::uint32_t max_tokens) const {
    return scheduler::testing::scripted_output(id, 0, prompt, max_tokens);
  }
  bool is_prefix(const std::vector<TokenId>& a, const std::vector<TokenId>& b) const {
    return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  std::vector<FinishReason> finishes(RequestId id) { return received[id].finishes[0]; }
  kv::KvStats kv_stats() { return request<kv::KvStats>(engine.block_manager, kv::kv_stats_atom::value); }
  EngineStats stats() { return request<EngineStats>(engine.scheduler, sched_stats_atom::value); }
  std::vector<RequestRecord> records() {
    return request<std::vector<RequestRecord>>(engine.scheduler, sched_requests_atom::value);
  }
};

const std::vector<FinishReason> ended_with_error{FinishReason::error};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(engine_failure_suite, Fixture)

BOOST_AUTO_TEST_CASE(a_step_the_shard_fails_ends_its_requests_with_an_error_and_the_next_request_succeeds) {
  plan.kind = FaultPlan::Kind::error;
  plan.step = 3;
  start(small_config());
  BOOST_REQUIRE((submit(1, 6, 40) == SubmitStatus::accepted));
  BOOST_REQUIRE((submit(2, 9, 40) == SubmitStatus::accepted));
  run();
  for (RequestId id : {1, 2}) {
    BOOST_TEST(finishes(id) == ended_with_error);
    // Request 1 ran in steps 1 (its prefill) and 2, request 2 in step 2; step 3 failed.
    BOOST_TEST(received[id].tokens[0].size() == (id == 1 ? 2u : 1u));
    BOOST_TEST(is_prefix(received[id].tokens[0], expected(id, id == 1 ? 6 : 9, 40)));
    BOOST_TEST(contains(received[id].error, "shard rank 0 failed step 3"), received[id].error);
    BOOST_TEST(contains(received[id].error, "injected fault at step 3"), received[id].error);
  }
  BOOST_TEST(kv_stats().device_used == 0u);  // the failed step's blocks were freed
  BOOST_REQUIRE((submit(3, 5, 12) == SubmitStatus::accepted));
  run();
  BOOST_TEST(received[3].tokens[0] == expected(3, 5, 12));
  BOOST_TEST(finishes(3).size() == 1u);
  BOOST_TEST((finishes(3)[0] != FinishReason::error));
  const auto kv = kv_stats();
  BOOST_TEST(kv.device_used == 0u);
  BOOST_TEST(kv.num_sequences == 0u);
  const auto st = stats();
  BOOST_TEST(st.healthy);  // a failed step is not a lost component
  BOOST_TEST(st.failure.empty());
}

BOOST_AUTO_TEST_CASE(a_request_waiting_outside_the_failed_step_goes_on_and_succeeds) {
  plan.kind = FaultPlan::Kind::error;
  plan.step = 2;
  auto c = small_config();
  c.scheduler.max_num_seqs = 1;  // the second request waits while the first runs
  c.scheduler.max_num_batched_tokens = 128;
  start(c);
  BOOST_REQUIRE((submit(1, 6, 30) == SubmitStatus::accepted));
  BOOST_REQUIRE((submit(2, 7, 30) == SubmitStatus::accepted));
  run();
  BOOST_TEST(finishes(1) == ended_with_error);
  BOOST_TEST(received[2].tokens[0] == expected(2, 7, 30));
  BOOST_TEST(finishes(2).size() == 1u);
  BOOST_TEST((finishes(2)[0] != FinishReason::error));
  BOOST_TEST(kv_stats().device_used == 0u);
}

BOOST_AUTO_TEST_CASE(a_step_the_shard_never_answers_is_failed_by_the_watchdog_after_step_timeout) {
  plan.kind = FaultPlan::Kind::hang;
  plan.step = 3;
  start(small_config(1.5));
  BOOST_REQUIRE((submit(1, 6, 40) == SubmitStatus::accepted));
  run();
  BOOST_TEST(finishes(1) == ended_with_error);
  BOOST_TEST(contains(received[1].error, "shard rank 0 did not answer step 3 within 1.5 s"), received[1].error);
  const auto recs = records();
  BOOST_REQUIRE(recs.size() == 1u);
  BOOST_REQUIRE(plan.received.count(3) == 1u);
  // Failed exactly step_timeout_s of virtual time after the step was sent.
  BOOST_TEST(recs[0].finished - plan.received.at(3) == 1'500'000'000);
  BOOST_TEST(kv_stats().device_used == 0u);
  BOOST_REQUIRE((submit(2, 5, 10) == SubmitStatus::accepted));
  run();
  BOOST_TEST(received[2].tokens[0] == expected(2, 5, 10));
  BOOST_TEST((finishes(2)[0] != FinishReason::error));
  BOOST_TEST(kv_stats().device_used == 0u);
  BOOST_TEST(stats().healthy);
}

BOOST_AUTO_TEST_CASE(a_late_answer_for_a_failed_step_is_ignored_while_the_next_request_runs) {
  plan.kind = FaultPlan::Kind::late;
  plan.step = 3;
  plan.late_ns = 1'100'000'000;  // arrives 0.1 s after the watchdog failed the step
  start(small_config(1.0));
  const auto t0 = now_ns();
  BOOST_REQUIRE((submit(1, 6, 40) == SubmitStatus::accepted));
  run_to(t0 + 1'050'000'000);
  BOOST_TEST(finishes(1) == ended_with_error);
  // 120 tokens of 2 ms: this request is mid-way when the late answer to step 3 comes.
  BOOST_REQUIRE((submit(2, 8, 120) == SubmitStatus::accepted));
  run();
  BOOST_TEST(received[2].tokens[0] == expected(2, 8, 120));  // nothing of step 3's answer mixed in
  BOOST_TEST(finishes(2).size() == 1u);
  BOOST_TEST((finishes(2)[0] != FinishReason::error));
  BOOST_TEST(received[1].finishes[0].size() == 1u);  // one finish, however late the answer
  BOOST_TEST(kv_stats().device_used == 0u);
}

BOOST_DATA_TEST_CASE_F(Fixture, a_stopped_shard_ends_every_request_with_an_error_naming_it_and_later_submits_are_refused,
                       boost::unit_test::data::make({0u, 1u}), rank) {
  auto c = small_config();
  c.engine.tensor_parallel_degree = 2;
  c.scheduler.max_num_seqs = 1;  // one request runs, one waits
  start(c);
  BOOST_REQUIRE((submit(1, 6, 100) == SubmitStatus::accepted));
  BOOST_REQUIRE((submit(2, 6, 100) == SubmitStatus::accepted));
  for (int i = 0; i < 4; ++i) {
    sched.trigger_timeout();
    consume_messages();
  }
  BOOST_REQUIRE(!received[1].tokens[0].empty());
  const auto killed_at = now_ns();
  caf::anon_send_exit(engine.shards[rank], caf::exit_reason::kill);
  consume_messages();  // no timeout fires: the monitor alone ends the requests
  BOOST_TEST(now_ns() == killed_at);
  const std::string name = "shard rank " + std::to_string(rank) + " stopped";
  for (RequestId id : {1, 2}) {
    BOOST_TEST(finishes(id) == ended_with_error);
    BOOST_TEST(contains(received[id].error, name), received[id].error);
  }
  BOOST_TEST((submit(3, 4, 4) == SubmitStatus::unavailable));
  const auto st = stats();
  BOOST_TEST(!st.healthy);
  BOOST_TEST(contains(st.failure, name), st.failure);
  BOOST_TEST(contains(st.failure, "kill"), st.failure);  // the exit reason
  BOOST_TEST(st.counts.waiting + st.counts.running + st.counts.swapped == 0u);
  BOOST_TEST(kv_stats().device_used == 0u);  // the block manager is still there: blocks went back
  BOOST_TEST(!sched.has_pending_timeout());  // run() above ended: no watchdog left re-arming
}

BOOST_AUTO_TEST_CASE(a_stopped_block_manager_ends_every_request_with_an_error_naming_it) {
  auto c = small_config();
  c.scheduler.max_num_seqs = 1;
  start(c);
  BOOST_REQUIRE((submit(1, 6, 100) == SubmitStatus::accepted));
  BOOST_REQUIRE((submit(2, 6, 100) == SubmitStatus::accepted));
  for (int i = 0; i < 4; ++i) {
    sched.trigger_timeout();
    consume_messages();
  }
  caf::anon_send_exit(engine.block_manager, caf::exit_reason::kill);
  consume_messages();
  for (RequestId id : {1, 2}) {
    BOOST_TEST(finishes(id) == ended_with_error);
    BOOST_TEST(contains(received[id].error, "block manager"), received[id].error);
  }
  BOOST_TEST((submit(3, 4, 4) == SubmitStatus::unavailable));
  const auto st = stats();
  BOOST_TEST(!st.healthy);
  BOOST_TEST(contains(st.failure, "the block manager stopped"), st.failure);
}

BOOST_AUTO_TEST_CASE(a_block_manager_that_never_answers_a_reservation_fails_the_engine_after_step_timeout) {
  const auto c = small_config(2.0);
  const auto opt = SchedulerOptions::from(c, capacity.device_blocks, capacity.host_blocks);
  kv::BlockManagerOptions bm;
  bm.num_device_blocks = capacity.device_blocks;
  bm.num_host_blocks = capacity.host_blocks;
  bm.block_size = opt.block_size;
  bm.watermark = opt.watermark;
  bm.mode = opt.kv_mode();
  engine.block_manager = kv::spawn_block_manager(sys, bm);
  auto proxy = sys.spawn(actorlm::testing::withholding_block_manager, engine.block_manager, std::uint64_t{3});
  engine.shards = {actorlm::testing::spawn_faulty_shard(sys, 0, step_ns, &plan)};
  engine.scheduler = spawn_scheduler(sys, opt, proxy, engine.shards);
  const auto t0 = now_ns();
  BOOST_REQUIRE((submit(1, 6, 40) == SubmitStatus::accepted));
  run_to(t0 + 1'000'000'000);
  BOOST_TEST(finishes(1).empty());  // still waiting: the deadline has not passed
  run();
  BOOST_TEST(finishes(1) == ended_with_error);
  BOOST_TEST(contains(received[1].error, "the block manager did not answer the reservation for step 3 within 2 s"),
             received[1].error);
  BOOST_TEST((submit(2, 4, 4) == SubmitStatus::unavailable));
  BOOST_TEST(!stats().healthy);
  caf::anon_send_exit(proxy, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_normal_shutdown_is_not_reported_as_a_failure) {
  auto c = small_config();
  c.engine.tensor_parallel_degree = 2;
  start(c);
  BOOST_REQUIRE((submit(1, 6, 100) == SubmitStatus::accepted));
  for (int i = 0; i < 3; ++i) {
    sched.trigger_timeout();
    consume_messages();
  }
  engine::stop_engine(engine);  // the scheduler's exit goes first, then the shards' and the block manager's
  run();
  BOOST_TEST(received[1].finishes[0].empty());  // the scheduler stopped first: no error event was sent
  BOOST_TEST(received[1].error.empty());
}

BOOST_AUTO_TEST_CASE(the_deadline_costs_one_timer_per_engine_not_one_per_step_and_none_when_idle) {
  start(small_config(1.0));
  const auto t0 = now_ns();
  for (RequestId id = 1; id <= 16; ++id) BOOST_REQUIRE((submit(id, 4 + id % 5, 80) == SubmitStatus::accepted));
  std::size_t timeouts = 0;
  for (; timeouts < 1'000'000 && sched.has_pending_timeout(); ++timeouts) {
    sched.trigger_timeout();
    consume_messages();
  }
  BOOST_TEST(!sched.has_pending_timeout());  // idle: the watchdog did not re-arm itself
  const double seconds = double(now_ns() - t0) * 1e-9;
  const std::size_t shard_timers = plan.received.size();  // one delayed answer per step
  BOOST_TEST(shard_timers > 100u);
  BOOST_TEST(timeouts - shard_timers <= std::size_t(seconds / 1.0) + 2, timeouts - shard_timers << " watchdog messages in "
                                                                        << seconds << " s of virtual time");
  for (RequestId id = 1; id <= 16; ++id)
    BOOST_TEST((finishes(id).size() == 1u && finishes(id)[0] != FinishReason::error), "request " << id << ": "
                                                                                     << received[id].error);
}

BOOST_DATA_TEST_CASE_F(Fixture, random_loads_with_failing_steps_end_every_sample_once_and_leak_no_block,
                       boost::unit_test::data::make({config::Batching::dynamic, config::Batching::continuous,
                                                     config::Batching::paged}),
                       batching) {
  // Every 2nd to 12th step fails, under a cache tight enough to preempt (by swapping, so that
  // failed steps carry swaps too) and with n = 2 requests (forks sharing blocks).
  std::mt19937 rng(11);
  plan.kind = FaultPlan::Kind::error;
  for (std::uint64_t s = 3; s < 4000; s += 2 + rng() % 11) plan.more_steps.insert(s);
  auto c = small_config();
  c.engine.batching = batching;
  c.scheduler.preemption = config::Preemption::swap;
  c.scheduler.batch_size = 3;
  c.scheduler.max_batch_delay_ms = 10;
  c.model.max_model_len = 128;
  engine = engine::spawn_engine(sys, c, {24, 16, 0}, [this](caf::actor_system& s, std::uint32_t rank, std::uint32_t) {
    return actorlm::testing::spawn_faulty_shard(s, rank, step_ns, &plan);
  });
  std::map<RequestId, std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> lens;  // prompt, max_tokens, n
  for (RequestId id = 1; id <= 30; ++id) {
    const std::uint32_t p = 1 + rng() % 12, m = 1 + rng() % 24, n = id % 5 == 0 ? 2 : 1;
    RequestSpec spec;
    spec.id = id;
    spec.prompt.assign(p, TokenId(400 + id % 50));
    spec.max_tokens = m;
    spec.n = n;
    spec.stop_token_ids = {stop_token};
    auto rp = self->request(engine.scheduler, caf::infinite, std::move(spec), sink);
    consume_messages();
    SubmitStatus status = SubmitStatus::invalid;
    rp.receive([&](SubmitStatus st) { status = st; }, [&](caf::error&) {});
    BOOST_REQUIRE((status == SubmitStatus::accepted));
    lens[id] = {p, m, n};
    if (id % 6 == 0) {  // let some steps run between arrivals
      sched.trigger_timeout();
      consume_messages();
    }
  }
  run();
  std::size_t failed = 0, succeeded = 0;
  for (const auto& [id, pmn] : lens) {
    const auto [p, m, n] = pmn;
    for (std::uint32_t j = 0; j < n; ++j) {
      const auto& f = received[id].finishes[j];
      BOOST_REQUIRE_MESSAGE(f.size() == 1u, "request " << id << " sample " << j << ": " << f.size() << " finishes");
      const auto want = scheduler::testing::scripted_output(id, j, p, m);
      if (f[0] == FinishReason::error) {
        ++failed;
        BOOST_TEST(is_prefix(received[id].tokens[j], want), "request " << id << " sample " << j);
      } else {
        ++succeeded;
        BOOST_TEST(received[id].tokens[j] == want, "request " << id << " sample " << j);
      }
    }
  }
  BOOST_TEST(failed > 0u);
  BOOST_TEST(succeeded > 0u);
  const auto kv = kv_stats();
  BOOST_TEST(kv.device_used == 0u);
  BOOST_TEST(kv.host_used == 0u);
  BOOST_TEST(kv.num_sequences == 0u);
  BOOST_TEST(stats().healthy);
}

BOOST_AUTO_TEST_SUITE_END()
