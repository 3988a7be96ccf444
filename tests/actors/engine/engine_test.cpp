// The engine's actors together (block manager, scheduler, scripted shards) on CAF's
// deterministic test coordinator with virtual time.
#define BOOST_TEST_MODULE engine
#include <boost/test/unit_test.hpp>

#define CAF_TEST_NO_MAIN
#define FAIL(msg) BOOST_FAIL(msg)
#include <caf/test/dsl.hpp>
#include <caf/test/unit_test_impl.hpp>

#include "actors/engine/engine.hpp"
#include "tests/actors/engine/scripted_shard.hpp"

#include <random>

using namespace actorlm;
using namespace actorlm::scheduler;
using actorlm::scheduler::testing::stop_token;

namespace {

struct Received {
  std::map<std::uint32_t, std::vector<TokenId>> tokens;  // by sample
  std::map<std::uint32_t, std::vector<FinishReason>> finishes;
};
using SinkLog = std::map<RequestId, Received>;

// (Spawned with an argument, not a capture: CAF 0.17 binds a reference to a null tuple when a
// function-based actor has no arguments, which UBSan reports.)
token_sink::behavior_type collector(token_sink::pointer, SinkLog* log) {
  return {[log](const SinkBatch& b) {
    for (const auto& t : b.tokens) (*log)[t.request].tokens[t.sample].push_back(t.token);
    for (const auto& f : b.finished) (*log)[f.request].finishes[f.sample].push_back(f.reason);
  }};
}

token_sink spawn_collector(caf::actor_system& sys, SinkLog* log) { return sys.spawn(collector, log); }

struct NetworkConfig : caf::actor_system_config {
  NetworkConfig() {
    kv::add_block_manager_types(*this);
    shard::add_shard_types(*this);
  }
};

config::Config small_config(config::Batching batching) {
  config::Config c;
  c.engine.batching = batching;
  c.cache.block_size = 4;
  c.cache.watermark = 0;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_batched_tokens = 128;
  c.scheduler.batch_size = 3;
  c.scheduler.max_batch_delay_ms = 100;
  c.scheduler.max_queue_len = 64;
  c.model.max_model_len = 128;
  return c;
}

constexpr std::int64_t step_ns = 2'000'000;  // every scripted step takes 2 ms

struct Fixture : test_coordinator_fixture<NetworkConfig> {
  actorlm::testing::ShardLog shard_log;
  SinkLog received;
  engine::EngineActors engine;
  token_sink sink = spawn_collector(sys, &received);

  void start(const config::Config& c, engine::KvCapacity kv = {48, 16}) {
    engine = engine::spawn_engine(sys, c, kv, [this](caf::actor_system& s, std::uint32_t rank, std::uint32_t) {
      return actorlm::testing::spawn_scripted_shard(s, rank, step_ns, &shard_log);
    });
  }
  ~Fixture() { engine::stop_engine(engine); }

  SubmitStatus submit(RequestId id, std::uint32_t prompt, std::uint32_t max_tokens, std::uint32_t n = 1) {
    RequestSpec s;
    s.id = id;
    s.prompt.assign(prompt, TokenId(400 + id % 50));
    s.max_tokens = max_tokens;
    s.n = n;
    s.stop_token_ids = {stop_token};
    auto rp = self->request(engine.scheduler, caf::infinite, std::move(s), sink);
    consume_messages();  // the scheduler handles it (timeouts are not fired)
    SubmitStatus status = SubmitStatus::invalid;
    rp.receive([&](SubmitStatus st) { status = st; }, [&](caf::error&) {});
    return status;
  }

  std::vector<TokenId> expected(RequestId id, std::uint32_t prompt, std::uint32_t max_tokens,
                                std::uint32_t sample) const {
    return scheduler::testing::scripted_output(id, sample, prompt, max_tokens);
  }

  kv::KvStats kv_stats() { return request<kv::KvStats>(engine.block_manager, kv::kv_stats_atom::value); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(engine_suite, Fixture)

BOOST_AUTO_TEST_CASE(serves_requests_end_to_end_with_exactly_the_scripted_tokens) {
  start(small_config(config::Batching::paged));
  for (RequestId id = 1; id <= 6; ++id) BOOST_TEST((submit(id, 5 + id, 4 + id, id == 3 ? 2 : 1) == SubmitStatus::accepted));
  run();  // runs every actor and fires every timeout: virtual time moves step by step
  for (RequestId id = 1; id <= 6; ++id) {
    const std::uint32_t n = id == 3 ? 2 : 1;
    for (std::uint32_t j = 0; j < n; ++j) {
      BOOST_TEST(received[id].tokens[j] == expected(id, 5 + id, 4 + id, j));
      BOOST_TEST(received[id].finishes[j].size() == 1u);
    }
  }
  const auto kv = kv_stats();
  BOOST_TEST(kv.device_used == 0u);  // every finished sequence returned its blocks
  BOOST_TEST(kv.num_sequences == 0u);
  const auto st = request<EngineStats>(engine.scheduler, sched_stats_atom::value);
  BOOST_TEST(st.counts.waiting + st.counts.running + st.counts.swapped == 0u);
  BOOST_TEST(st.steps > 0u);
}

BOOST_AUTO_TEST_CASE(every_rank_receives_every_step_and_rank_0_answers) {
  auto c = small_config(config::Batching::paged);
  c.engine.tensor_parallel_degree = 2;
  start(c);
  submit(1, 8, 6);
  run();
  BOOST_TEST(received[1].tokens[0] == expected(1, 8, 6, 0));
  BOOST_TEST(!shard_log.steps_by_rank[0].empty());
  BOOST_TEST(shard_log.steps_by_rank[0] == shard_log.steps_by_rank[1]);
}

BOOST_AUTO_TEST_CASE(dynamic_batching_waits_for_the_delay_in_virtual_time) {
  start(small_config(config::Batching::dynamic));
  submit(1, 8, 3);
  BOOST_TEST(received[1].tokens[0].empty());
  advance_time(std::chrono::milliseconds(99));
  consume_messages();
  BOOST_TEST(received[1].tokens[0].empty());  // one request of a batch of three: still waiting
  advance_time(std::chrono::milliseconds(1));
  run();
  BOOST_TEST(received[1].tokens[0] == expected(1, 8, 3, 0));
}

BOOST_AUTO_TEST_CASE(abort_ends_a_running_request_and_frees_its_blocks) {
  start(small_config(config::Batching::paged));
  submit(1, 20, 100);
  for (int i = 0; i < 3; ++i) {  // a few steps
    sched.trigger_timeout();
    consume_messages();
  }
  BOOST_TEST(!received[1].tokens[0].empty());
  BOOST_TEST(request<bool>(engine.scheduler, sched_abort_atom::value, RequestId{1}));
  run();
  BOOST_TEST((received[1].finishes[0] == std::vector<FinishReason>{FinishReason::abort}));
  BOOST_TEST(kv_stats().device_used == 0u);
  BOOST_TEST(!request<bool>(engine.scheduler, sched_abort_atom::value, RequestId{1}));
}

BOOST_AUTO_TEST_CASE(refuses_submissions_past_max_queue_len) {
  auto c = small_config(config::Batching::dynamic);
  c.scheduler.max_queue_len = 2;
  c.scheduler.batch_size = 8;  // nobody starts before the delay
  start(c);
  BOOST_TEST((submit(1, 4, 2) == SubmitStatus::accepted));
  BOOST_TEST((submit(2, 4, 2) == SubmitStatus::accepted));
  BOOST_TEST((submit(3, 4, 2) == SubmitStatus::queue_full));
  run();
  BOOST_TEST(received.count(3) == 0u);
  BOOST_TEST(received[2].finishes[0].size() == 1u);
}

BOOST_AUTO_TEST_CASE(all_three_regimes_serve_a_random_load_under_a_tight_cache) {
  for (auto batching : {config::Batching::dynamic, config::Batching::continuous, config::Batching::paged}) {
    received.clear();
    auto c = small_config(batching);
    c.scheduler.preemption = config::Preemption::swap;
    start(c, {24, 16});
    std::mt19937 rng(7);
    std::map<RequestId, std::pair<std::uint32_t, std::uint32_t>> lens;
    for (RequestId id = 1; id <= 24; ++id) {
      const std::uint32_t p = 1 + rng() % 12, m = 1 + rng() % 24;
      BOOST_REQUIRE((submit(id, p, m) == SubmitStatus::accepted));
      lens[id] = {p, m};
      if (id % 6 == 0) {  // let some steps run between arrivals
        sched.trigger_timeout();
        consume_messages();
      }
    }
    run();
    for (auto& [id, pm] : lens) {
      BOOST_TEST(received[id].tokens[0] == expected(id, pm.first, pm.second, 0));
      BOOST_TEST(received[id].finishes[0].size() == 1u);
    }
    BOOST_TEST(kv_stats().device_used == 0u);
    engine::stop_engine(engine);
    run();
  }
}

BOOST_AUTO_TEST_SUITE_END()
