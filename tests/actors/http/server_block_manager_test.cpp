// End to end, in process: the HTTP server over the sim backend's fake GPU server (wall clock),
// whose block-manager actor is killed while a streaming and a non-streaming request run. (No
// config key can stop the block manager of a server process, so the server runs here, as
// `bench serve` runs it; the shard faults go through the real process in server_failures.)
#define BOOST_TEST_MODULE server_block_manager
#include "tests/actors/http/server_process.hpp"

#include "actors/config/config.hpp"
#include "actors/http/http_server.hpp"
#include "actors/serving/served_model.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>

using namespace actorlm;
using namespace actorlm::testing;

namespace {

const char* const fake_gpu = R"([server]
host = "127.0.0.1"
port = 0
[engine]
backend = "sim"
tensor_parallel_degree = 8
[model]
name = "falcon-40b"
preset = "falcon-40b"
max_model_len = 2048
[sim]
instance = "g5.48xlarge"
hardware = "a10g"
clock = "wall"
)";

httplib::Client client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);  // bounds every exchange: a hung one fails the test, never blocks it
  c.set_connection_timeout(5, 0);
  return c;
}

json long_completion(bool stream) {
  return {{"model", "falcon-40b"}, {"prompt", "Once upon a time"}, {"max_tokens", 1000}, {"stream", stream}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_stopped_block_manager_fails_the_requests_in_flight_and_turns_ready_and_health_off) {
  const auto parsed = config::parse_config(fake_gpu, "fake_gpu.toml");
  BOOST_REQUIRE(parsed.ok());
  caf::actor_system_config sys_cfg;
  serving::register_engine_types(sys_cfg);
  caf::actor_system sys{sys_cfg};
  serving::ServedModel model(sys, parsed.config);
  http::HttpServer server(sys, model, parsed.config);
  const int port = server.bind();
  std::thread serving([&] { server.serve(); });

  Stream streamed;
  int status = 0;
  json body;
  std::thread streaming([&] {
    auto c = client(port);
    streamed = post_stream(c, "/v1/completions", long_completion(true));
  });
  std::thread plain([&] {
    auto c = client(port);
    if (auto r = post_json(c, "/v1/completions", long_completion(false))) {
      status = r->status;
      body = json::parse(r->body, nullptr, false);
    }
  });
  auto c = client(port);
  bool running = false;
  for (int i = 0; i < 500 && !running; ++i) {
    if (auto m = c.Get("/metrics")) running = metric(m->body, "actorlm_num_requests_running") == 2;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_REQUIRE(running);
  const auto killed = std::chrono::steady_clock::now();
  caf::anon_send_exit(model.engine().actors().block_manager, caf::exit_reason::kill);
  streaming.join();
  plain.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  BOOST_TEST(seconds < 1.0, "both requests ended " << seconds << " s after the block manager stopped");

  BOOST_TEST(status == 500, body.dump());
  const std::string message = body["error"].value("message", "");
  BOOST_TEST(message.find("the block manager stopped") != std::string::npos, message);
  BOOST_REQUIRE(streamed.data.size() >= 2);
  BOOST_TEST(streamed.data.back() == "[DONE]");
  const json event = json::parse(streamed.data[streamed.data.size() - 2], nullptr, false);
  BOOST_TEST(event["error"].value("message", "").find("the block manager stopped") != std::string::npos, streamed.raw);

  const auto ready = c.Get("/ready");
  BOOST_REQUIRE(ready);
  BOOST_TEST(ready->status == 503);
  BOOST_TEST(ready->body.find("the block manager stopped") != std::string::npos, ready->body);
  const auto m = c.Get("/metrics");
  BOOST_REQUIRE(m);
  BOOST_TEST(metric(m->body, "actorlm_engine_healthy") == 0);
  BOOST_TEST(metric(m->body, "actorlm_ready") == 0);
  const auto refused = post_json(c, "/v1/completions", long_completion(false));
  BOOST_REQUIRE(refused);
  BOOST_TEST(refused->status == 503);
  BOOST_TEST(refused->body.find("the engine is unavailable") != std::string::npos, refused->body);
  BOOST_TEST(refused->body.find("the block manager stopped") != std::string::npos, refused->body);

  server.stop();
  serving.join();
}
