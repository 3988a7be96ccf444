// The blocking Engine facade under CAF's normal (threaded) scheduler, wall-clock time.
#define BOOST_TEST_MODULE engine_facade
#include <boost/test/unit_test.hpp>

#include "actors/engine/engine.hpp"
#include "tests/actors/engine/scripted_shard.hpp"

#include <caf/actor_system_config.hpp>

#include <chrono>
#include <mutex>
#include <thread>

using namespace actorlm;
using namespace actorlm::scheduler;

namespace {

struct Collected {
  std::mutex mu;
  std::map<RequestId, std::vector<TokenId>> tokens;  // sample 0
  std::map<RequestId, int> finishes;
};

token_sink::behavior_type collector(token_sink::pointer, Collected* c) {
  return {[c](const SinkBatch& b) {
    std::lock_guard<std::mutex> lock(c->mu);  // the test thread reads it too
    for (const auto& t : b.tokens) c->tokens[t.request].push_back(t.token);
    for (const auto& f : b.finished) c->finishes[f.request]++;
  }};
}

}  // namespace

BOOST_AUTO_TEST_CASE(serves_concurrent_submissions_on_the_threaded_scheduler) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::size_t{2});
  caf::actor_system sys{cfg};
  config::Config c;
  c.cache.block_size = 4;
  c.scheduler.max_num_seqs = 16;
  c.scheduler.max_num_batched_tokens = 256;
  c.model.max_model_len = 128;
  Collected got;
  {
    engine::Engine eng(sys, c, {40, 16}, [](caf::actor_system& s, std::uint32_t rank, std::uint32_t) {
      return actorlm::testing::spawn_scripted_shard(s, rank, 200'000, nullptr);  // 0.2 ms steps
    });
    auto sink = sys.spawn(collector, &got);
    constexpr RequestId n = 40;
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t)  // four client threads submit concurrently
      clients.emplace_back([&, t] {
        for (RequestId id = 1 + t; id <= n; id += 4) {
          RequestSpec s;
          s.id = id;
          s.prompt.assign(3 + id % 7, TokenId(500 + id));
          s.max_tokens = 2 + id % 11;
          s.stop_token_ids = {scheduler::testing::stop_token};
          BOOST_TEST((eng.submit(std::move(s), sink) == SubmitStatus::accepted));
        }
      });
    for (auto& th : clients) th.join();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto done = [&] {
      std::lock_guard<std::mutex> lock(got.mu);
      return got.finishes.size() == n;
    };
    while (!done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    BOOST_REQUIRE(done());
    for (RequestId id = 1; id <= n; ++id) {
      const auto want = scheduler::testing::scripted_output(id, 0, 3 + id % 7, 2 + id % 11);
      std::lock_guard<std::mutex> lock(got.mu);
      BOOST_TEST(got.tokens[id] == want);
      BOOST_TEST(got.finishes[id] == 1);
    }
    const auto st = eng.stats();
    BOOST_TEST(st.counts.waiting + st.counts.running + st.counts.swapped == 0u);
    BOOST_TEST(!eng.abort(1));  // finished requests are gone
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }  // the Engine stops its actors; the actor system then shuts down without waiting forever
}
