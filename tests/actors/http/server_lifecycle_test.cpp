// End to end: the server's lifecycle under load: many concurrent streams, clients that hang
// up (their requests are aborted and their KV blocks freed), and draining on SIGTERM. Requests
// that must outlive a step of the test ask for ignore_eos: at temperature 1 a sampled EOS can
// end them early (the second-signal case failed 2 of 19 runs with exit 0, the drain done first;
// 10 of 10 passed with ignore_eos).
#define BOOST_TEST_MODULE server_lifecycle
#include "tests/actors/http/server_process.hpp"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

using namespace actorlm::testing;

namespace {

const std::string kModel = "SmolLM2-135M-Instruct";

}  // namespace

BOOST_AUTO_TEST_CASE(sixty_four_concurrent_streams_all_complete) {
  ServerProcess s;
  constexpr int clients = 64;
  std::vector<Stream> results(clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&, i] {
      auto c = s.client();
      results[i] = post_stream(c, i % 2 ? "/v1/completions" : "/v1/chat/completions",
                               i % 2 ? json{{"model", kModel}, {"prompt", "Story " + std::to_string(i) + ":"},
                                            {"max_tokens", 6}, {"stream", true}, {"seed", i}}
                                     : json{{"model", kModel}, {"max_tokens", 6}, {"stream", true}, {"seed", i},
                                            {"messages", {{{"role", "user"}, {"content", "Say " + std::to_string(i)}}}}});
    });
  for (auto& t : threads) t.join();
  int completed = 0;
  for (int i = 0; i < clients; ++i) {
    const Stream& r = results[i];
    BOOST_TEST(r.status == 200, "client " << i << ": " << r.error << " " << r.raw.substr(0, 300));
    if (r.data.empty() || r.data.back() != "[DONE]") continue;
    const auto chunks = r.chunks();
    const json& last = chunks.back()["choices"][0];
    BOOST_TEST((last["finish_reason"] == "length" || last["finish_reason"] == "stop"), "client " << i);
    ++completed;
  }
  BOOST_TEST(completed == clients, "every stream ends with a finish reason and [DONE]; server log:\n" << s.log());
  BOOST_TEST(metrics_reach(s, [](const std::string& m) {
    return metric(m, "actorlm_kv_cache_used_blocks") == 0 && metric(m, "actorlm_num_requests_running") == 0;
  }));
  // The steps that ran: at least 6 (6 tokens each), their shards' execution a part of their wall
  // time, all of it host work on the cpu backend.
  auto m = s.client().Get("/metrics");
  BOOST_REQUIRE(m);
  const double steps = metric(m->body, "actorlm_engine_steps_total");
  const double wall = metric(m->body, "actorlm_engine_step_seconds_total");
  const double shard = metric(m->body, "actorlm_shard_step_seconds_total");
  BOOST_TEST(steps >= 6);
  BOOST_TEST(shard > 0);
  BOOST_TEST(wall >= shard, wall << " s of steps, " << shard << " s of it in the shards");
  // The cpu backend has no device to wait for: all of its shard time is host work.
  BOOST_TEST(metric(m->body, "actorlm_shard_host_seconds_total") == shard);
}

BOOST_AUTO_TEST_CASE(a_streaming_client_that_hangs_up_has_its_request_aborted_and_blocks_freed) {
  ServerProcess s;
  auto c = s.client();
  int events = 0;
  post_stream(c, "/v1/completions", {{"model", kModel}, {"prompt", "List of numbers:"}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}},
              [&](const Stream& st) { return (events = int(st.data.size())) < 3; });
  const auto hung_up = std::chrono::steady_clock::now();
  BOOST_TEST(events >= 3);
  BOOST_TEST(metrics_reach(s, [](const std::string& m) {
    return metric(m, "actorlm_kv_cache_used_blocks") == 0 && metric(m, "actorlm_num_requests_running") == 0;
  }, std::chrono::seconds(10)));
  BOOST_TEST_MESSAGE("blocks free " << std::chrono::duration<double>(std::chrono::steady_clock::now() - hung_up).count()
                                    << " s after the hang-up");
  auto m = c.Get("/metrics");
  BOOST_REQUIRE(m);
  BOOST_TEST(m->body.find("actorlm_request_success_total{finished_reason=\"abort\"} 1") != std::string::npos, m->body);
}

BOOST_AUTO_TEST_CASE(a_non_streaming_client_that_hangs_up_has_its_request_aborted) {
  ServerProcess s;
  // A raw socket: send the request, wait until the request runs, close without reading.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(s.port()));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string body = json{{"model", kModel}, {"prompt", "List of numbers:"}, {"max_tokens", 1500}, {"ignore_eos", true}}.dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  BOOST_REQUIRE(::send(fd, req.data(), req.size(), 0) == ssize_t(req.size()));
  BOOST_TEST(metrics_reach(s, [](const std::string& m) { return metric(m, "actorlm_kv_cache_used_blocks") > 0; }));
  ::close(fd);
  BOOST_TEST(metrics_reach(s, [](const std::string& m) {
    return metric(m, "actorlm_kv_cache_used_blocks") == 0 && metric(m, "actorlm_num_requests_running") == 0;
  }, std::chrono::seconds(10)));
}

BOOST_AUTO_TEST_CASE(sigterm_drains_in_flight_requests_refuses_new_ones_and_exits_zero) {
  ServerProcess s;
  std::atomic<bool> started{false};
  Stream in_flight;
  std::thread t([&] {
    auto c = s.client();
    in_flight = post_stream(c, "/v1/completions",
                            {{"model", kModel}, {"prompt", "One, two,"}, {"max_tokens", 24}, {"stream", true}, {"temperature", 0}},
                            [&](const Stream& st) { return (started = !st.data.empty()), true; });
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  s.signal(SIGTERM);
  auto c = s.client();
  // Readiness turns false and new work is refused while the stream goes on.
  int ready = 0, refused = 0;
  for (int i = 0; i < 200 && (ready != 503 || refused != 503); ++i) {
    if (auto r = c.Get("/ready")) ready = r->status;
    if (auto r = post_json(c, "/v1/completions", {{"model", kModel}, {"prompt", "x"}, {"max_tokens", 1}})) refused = r->status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST(ready == 503);
  BOOST_TEST(refused == 503);
  t.join();
  BOOST_REQUIRE(!in_flight.data.empty());
  BOOST_TEST(in_flight.data.back() == "[DONE]", "the request in flight finished");
  BOOST_TEST(in_flight.chunks().back()["choices"][0]["finish_reason"] == "length");
  BOOST_TEST(s.wait_exit(std::chrono::seconds(120)) == 0, s.log());
}

BOOST_AUTO_TEST_CASE(a_second_signal_exits_at_once) {
  ServerProcess s("[server]\ndrain_timeout_s = 600\n");
  std::atomic<bool> started{false};
  std::thread t([&] {
    auto c = s.client();
    post_stream(c, "/v1/completions", {{"model", kModel}, {"prompt", "Count:"}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}},
                [&](const Stream& st) { return (started = !st.data.empty()), true; });
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  s.signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  s.signal(SIGINT);
  BOOST_TEST(s.wait_exit(std::chrono::seconds(10)) == 128 + SIGINT);
  t.join();
}
