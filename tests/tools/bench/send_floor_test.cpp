// tools/bench/send_floor.hpp: the floor under bench serve's figures, driven by the benchmarks'
// own HTTP client (load_client.hpp) as bench serve drives it.
#define BOOST_TEST_MODULE tools_bench_send_floor
#include "tools/bench/send_floor.hpp"

#include "tools/bench/load_client.hpp"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace actorlm::bench;
using namespace std::chrono_literals;

// The requests sent at once from a LoadClient on a thread of its own, the floor serving them on
// this one.
std::vector<LoadResult> drive(SendFloor& floor, std::vector<LoadRequest> reqs, std::uint32_t steps,
                              std::chrono::microseconds interval, SendFloorRun& run) {
  const auto n = static_cast<std::uint32_t>(reqs.size());
  std::vector<LoadResult> results;
  std::thread client([&] {
    LoadClient c({Endpoint{"127.0.0.1", static_cast<std::uint16_t>(floor.port())}});
    results = c.run_all(std::move(reqs));
  });
  try {
    run = floor.serve(n, steps, interval, "falcon-40b", 20s);
  } catch (...) {
    client.join();
    throw;
  }
  client.join();
  return results;
}

LoadRequest stream_request() {
  LoadRequest r;
  r.body = R"({"prompt":"x","stream":true,"max_tokens":4})";
  r.timeout = 30s;
  return r;
}

// The completion chunk inside one floor chunk, its HTTP chunk and SSE framing checked.
nlohmann::json completion_of(const std::string& c) {
  const auto line = c.find("\r\n");
  BOOST_REQUIRE(line != std::string::npos);
  const std::string payload = c.substr(line + 2, c.size() - line - 4);
  BOOST_TEST(std::stoul(c.substr(0, line), nullptr, 16) == payload.size());
  BOOST_TEST(c.substr(c.size() - 2) == "\r\n");
  BOOST_REQUIRE(payload.starts_with("data: "));
  BOOST_REQUIRE(payload.ends_with("\n\n"));
  return nlohmann::json::parse(payload.substr(6, payload.size() - 8));
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_floor_chunk_is_one_http_chunk_holding_a_completion_chunk_with_one_token) {
  const std::string c = floor_chunk(7, "falcon-40b");
  const auto j = completion_of(c);
  BOOST_TEST(j.at("object") == "text_completion");
  BOOST_TEST(j.at("id") == "cmpl-7");
  BOOST_TEST(j.at("model") == "falcon-40b");
  BOOST_TEST(j.at("choices").at(0).at("text") == " tok");
  // The size of the server's chunk for a one-token text (StreamChunks), within a few bytes.
  BOOST_TEST(c.size() > 140u);
  BOOST_TEST(c.size() < 200u);
  // A model name that JSON must escape stays one string.
  BOOST_TEST(completion_of(floor_chunk(1, "a\"b")).at("model") == "a\"b");
}

// The client takes the kernel's receive time over from the realtime clock to steady_clock with
// two clock reads (load_client.cpp), which a preemption between them can skew: arrival times are
// compared with 1 ms to spare, at steps 100 ms apart.
BOOST_DATA_TEST_CASE(every_stream_gets_one_token_per_step_arriving_after_the_steps_start_then_done,
                     boost::unit_test::data::make({1u, 2u, 3u}), threads) {
  constexpr std::int64_t slack_ns = 1'000'000;
  SendFloor floor(threads);
  SendFloorRun run;
  const auto results = drive(floor, std::vector<LoadRequest>(5, stream_request()), 4, 100ms, run);
  BOOST_TEST(run.streams == 5u);
  BOOST_TEST(run.failed == 0u);
  BOOST_REQUIRE_EQUAL(run.step_ns.size(), 4u);
  for (std::size_t k = 1; k < run.step_ns.size(); ++k) BOOST_TEST(run.step_ns[k] > run.step_ns[k - 1]);
  std::set<std::string> ids;
  BOOST_REQUIRE_EQUAL(results.size(), 5u);
  for (const auto& r : results) {
    BOOST_TEST(to_string(r.outcome) == "complete");
    BOOST_TEST(r.status == 200);
    ids.insert(r.request_id);
    BOOST_REQUIRE_EQUAL(r.events.size(), 5u);
    for (std::size_t k = 0; k < 4; ++k) {
      BOOST_TEST(nlohmann::json::parse(r.events[k].data).at("choices").at(0).at("text") == " tok");
      // Sent in its step: after the step began, before the next one.
      BOOST_TEST(r.events[k].arrival_ns >= run.step_ns[k] - slack_ns);
      if (k + 1 < 4) BOOST_TEST(r.events[k].arrival_ns < run.step_ns[k + 1] + slack_ns);
    }
    BOOST_TEST(r.events[4].data == "[DONE]");
  }
  BOOST_TEST(ids == (std::set<std::string>{"1", "2", "3", "4", "5"}));
}

BOOST_AUTO_TEST_CASE(a_client_that_leaves_is_counted_failed_and_the_others_get_every_token) {
  SendFloor floor(2);
  std::vector<LoadRequest> reqs(3, stream_request());
  reqs[1].close_after_events = 1;
  SendFloorRun run;
  const auto results = drive(floor, reqs, 6, 100ms, run);
  BOOST_TEST(run.failed == 1u);
  BOOST_TEST(to_string(results[1].outcome) == "closed");
  for (std::size_t i : {0u, 2u}) {
    BOOST_TEST(to_string(results[i].outcome) == "complete");
    BOOST_TEST(results[i].events.size() == 7u);
  }
}

BOOST_AUTO_TEST_CASE(serve_says_how_many_connections_came_when_not_all_do) {
  SendFloor floor(2);
  try {
    floor.serve(2, 1, 1ms, "m", 1s);
    BOOST_FAIL("serve returned without its connections");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("0 of 2 connections") != std::string::npos);
  }
}
