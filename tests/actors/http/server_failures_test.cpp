// End to end: failures behind the real `actorlm serve` process, injected by the sim backend in
// wall-clock mode (sim.fault): a step answered with an error, a step never answered (the
// watchdog fails it after engine.step_timeout_s), a shard actor that stops. Each with a
// streaming and a non-streaming client at once; no client may hang (every exchange is bounded
// by the client's read timeout), and the server must say what failed.
#define BOOST_TEST_MODULE server_failures
#include "tests/actors/http/server_process.hpp"

#include <boost/test/data/test_case.hpp>

#include <atomic>

using namespace actorlm::testing;

namespace {

const std::string kModel = "falcon-40b";

// The fake GPU server of configs/sim-falcon40b-g5.48xlarge.toml with a fault at step `step`.
std::string fake_gpu(const std::string& fault, int step, int rank, double step_timeout_s) {
  return "[server]\nhost = \"127.0.0.1\"\ndrain_timeout_s = 10\n"
         "[engine]\nbackend = \"sim\"\ntensor_parallel_degree = 8\nbatching = \"paged\"\nstep_timeout_s = " +
         std::to_string(step_timeout_s) +
         "\n[scheduler]\nmax_num_seqs = 256\nmax_num_batched_tokens = 8192\n"
         "[model]\nname = \"falcon-40b\"\npreset = \"falcon-40b\"\nmax_model_len = 2048\n"
         "[sim]\ninstance = \"g5.48xlarge\"\nhardware = \"a10g\"\nclock = \"wall\"\nfault = \"" +
         fault + "\"\nfault_step = " + std::to_string(step) + "\nfault_rank = " + std::to_string(rank) + "\n";
}

json completion(bool stream, int max_tokens = 40) {
  return {{"model", kModel}, {"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"stream", stream}};
}

// A streaming and a non-streaming request sent at the same moment, both running when the
// fault's step comes (step 4: the first request's prefill is step 1).
struct Pair {
  Stream streamed;
  int status = 0;
  json body;
  double seconds = 0;  // until both ended
};

Pair send_pair(ServerProcess& s) {
  Pair p;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread t([&] {
    auto c = s.client(30);
    p.streamed = post_stream(c, "/v1/completions", completion(true));
  });
  auto c = s.client(30);
  if (auto r = post_json(c, "/v1/completions", completion(false))) {
    p.status = r->status;
    p.body = json::parse(r->body, nullptr, false);
  }
  t.join();
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

// The non-streamed one got an OpenAI-shaped 500 and the streamed one an error event then
// [DONE], both with a message containing `what`.
void check_failed(const Pair& p, const std::string& what, const std::string& log) {
  BOOST_TEST(p.status == 500, "non-streamed: " << p.body.dump() << "\nserver log:\n" << log);
  BOOST_TEST(p.body["error"]["type"] == "server_error", p.body.dump());
  const std::string message = p.body["error"].value("message", "");
  BOOST_TEST(message.find(what) != std::string::npos, message);
  const Stream& st = p.streamed;
  BOOST_TEST(st.status == 200, st.error);
  BOOST_REQUIRE_MESSAGE(st.data.size() >= 2, "streamed: " << st.raw);
  BOOST_TEST(st.data.back() == "[DONE]", st.raw);
  const json event = json::parse(st.data[st.data.size() - 2], nullptr, false);
  BOOST_TEST(event["error"]["type"] == "server_error", st.raw);
  const std::string streamed_message = event["error"].value("message", "");
  BOOST_TEST(streamed_message.find(what) != std::string::npos, streamed_message);
}

const char* const step_faults[] = {"error", "hang"};

}  // namespace

BOOST_DATA_TEST_CASE(a_failed_step_fails_its_requests_and_the_next_request_succeeds,
                     boost::unit_test::data::make(step_faults), fault) {
  const std::string kind = fault;
  ServerProcess s(fake_gpu(kind, 4, 0, 1.0));
  const Pair p = send_pair(s);
  check_failed(p, kind == "error" ? "shard rank 0 failed step 4" : "shard rank 0 did not answer step 4 within 1 s",
               s.log());
  if (kind == "error") {
    const std::string message = p.body["error"].value("message", "");
    BOOST_TEST(message.find("injected by rank 0 at step 4") != std::string::npos, message);  // the shard's own words
  } else {
    BOOST_TEST(p.seconds >= 1.0, "the watchdog waits engine.step_timeout_s; took " << p.seconds << " s");
  }
  BOOST_TEST(p.seconds < 10.0);
  // The engine goes on: the next requests run to their end.
  auto c = s.client(30);
  const auto next = post_json(c, "/v1/completions", completion(false, 8));
  BOOST_REQUIRE(next);
  BOOST_TEST(next->status == 200, next->body);
  BOOST_TEST(json::parse(next->body)["choices"][0]["finish_reason"] == "length");
  const Stream next_stream = post_stream(c, "/v1/completions", completion(true, 8));
  BOOST_REQUIRE(!next_stream.data.empty());
  BOOST_TEST(next_stream.data.back() == "[DONE]");
  BOOST_TEST(next_stream.chunks().back()["choices"][0]["finish_reason"] == "length", next_stream.raw);
  // No block leaked; the two failures are counted; the engine stayed healthy.
  BOOST_TEST(metrics_reach(s, [](const std::string& m) {
    return metric(m, "actorlm_kv_cache_used_blocks") == 0 && metric(m, "actorlm_num_requests_running") == 0;
  }));
  const auto m = c.Get("/metrics");
  BOOST_REQUIRE(m);
  BOOST_TEST(m->body.find("actorlm_request_success_total{finished_reason=\"error\"} 2") != std::string::npos, m->body);
  BOOST_TEST(metric(m->body, "actorlm_engine_healthy") == 1);
  BOOST_TEST(status_of(c.Get("/ready")) == 200);
}

BOOST_AUTO_TEST_CASE(a_stopped_shard_fails_every_request_turns_ready_off_and_the_server_exits_with_code_3) {
  ServerProcess s(fake_gpu("exit", 4, 3, 60.0));
  // Watches /ready and /metrics until the process stops answering.
  std::atomic<bool> watching{true};
  std::mutex mu;
  std::string ready_body;
  double healthy = -1;
  std::thread watcher([&] {
    auto c = s.client(5);
    while (watching) {
      if (auto r = c.Get("/ready"); r && r->status == 503) {
        std::lock_guard lock(mu);
        if (ready_body.empty()) ready_body = r->body;
      }
      if (auto m = c.Get("/metrics"); m && metric(m->body, "actorlm_engine_healthy") == 0) {
        std::lock_guard lock(mu);
        healthy = 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  const Pair p = send_pair(s);
  check_failed(p, "shard rank 3 stopped", s.log());
  BOOST_TEST(p.seconds < 5.0);
  // Refused from now on (the engine is unavailable, then the server drains).
  auto c = s.client(5);
  const auto late = post_json(c, "/v1/completions", completion(false, 4));
  BOOST_TEST((!late || late->status == 503), (late ? late->body : std::string("no answer")));
  const int code = s.wait_exit(std::chrono::seconds(20));
  watching = false;
  watcher.join();
  BOOST_TEST(code == 3, s.log());
  {
    std::lock_guard lock(mu);
    BOOST_TEST(ready_body.find("shard rank 3 stopped") != std::string::npos, "/ready said: " << ready_body);
    BOOST_TEST(healthy == 0);
  }
  BOOST_TEST(s.log().find("exiting with code 3") != std::string::npos, s.log());
}
