// End to end: how the real `actorlm serve` process (the sim backend's fake GPU server in wall
// clock mode) treats connections: pipelining, HTTP/1.0, Expect: 100-continue, lying or cut
// bodies, slow and idle clients, the connection limit, and a thousand concurrent streams.
#define BOOST_TEST_MODULE server_connections
#include "tests/actors/http/raw_client.hpp"
#include "tests/actors/http/server_process.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <memory>
#include <regex>

using namespace actorlm::testing;

namespace {

std::string fake_gpu(const std::string& server_keys) {
  return "[server]\nhost = \"127.0.0.1\"\nport = 0\n" + server_keys +
         "\n[engine]\nbackend = \"sim\"\ntensor_parallel_degree = 8\n[scheduler]\nmax_num_seqs = 1024\n"
         "max_queue_len = 4096\n[model]\nname = \"falcon-40b\"\npreset = \"falcon-40b\"\nmax_model_len = 2048\n"
         "[sim]\ninstance = \"g5.48xlarge\"\nhardware = \"a10g\"\nclock = \"wall\"\n";
}

// Short deadlines, to see them act.
ServerProcess& impatient() {
  static ServerProcess s(fake_gpu("header_timeout_s = 1.0\nbody_timeout_s = 1.0\nkeep_alive_timeout_s = 1.0\n"));
  return s;
}
// The defaults.
ServerProcess& patient() {
  static ServerProcess s(fake_gpu(""));
  return s;
}

const std::string completion = R"({"model":"falcon-40b","prompt":"Once upon a time","max_tokens":8})";
const std::string streamed = R"({"model":"falcon-40b","prompt":"Once upon a time","max_tokens":8,"stream":true})";
const std::string health = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

double used_blocks(const ServerProcess& s) {
  auto c = s.client(10);
  const auto r = c.Get("/metrics");
  BOOST_REQUIRE(r && r->status == 200);
  std::smatch m;
  BOOST_REQUIRE(std::regex_search(r->body, m, std::regex("\nactorlm_kv_cache_used_blocks ([0-9.e+]+)")));
  return std::stod(m[1]);
}

// Waits until the engine has released every block (aborts and finishes settle asynchronously).
bool blocks_return_to_zero(const ServerProcess& s) {
  for (int i = 0; i < 200; ++i) {
    if (used_blocks(s) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pipelined_requests_are_answered_in_order_on_one_connection) {
  RawClient c(impatient().port());
  c.send(health + post_request("/v1/completions", completion) +
         "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  const std::string all = c.read_all();
  BOOST_TEST(count_of(all, "HTTP/1.1 200 OK") == 3u, all);
  const auto h = all.find("{\"status\":\"ok\"}"), t = all.find("\"text_completion\""), m = all.find("\"object\":\"list\"");
  BOOST_TEST_REQUIRE((h != std::string::npos && t != std::string::npos && m != std::string::npos), all);
  BOOST_TEST((h < t && t < m));
}

BOOST_AUTO_TEST_CASE(an_http_1_0_client_gets_an_http_1_0_answer_and_the_connection_closes) {
  RawClient c(impatient().port());
  c.send("GET /health HTTP/1.0\r\n\r\n");
  const std::string all = c.read_all();
  BOOST_TEST(all.rfind("HTTP/1.0 200 OK", 0) == 0u, all);
  BOOST_TEST(all.find("{\"status\":\"ok\"}") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_http_1_0_stream_is_sent_unchunked_until_the_connection_closes) {
  RawClient c(impatient().port());
  c.send(post_request("/v1/completions", streamed, "HTTP/1.0"));
  const std::string all = c.read_all();
  BOOST_TEST(all.rfind("HTTP/1.0 200 OK", 0) == 0u, all);
  BOOST_TEST(all.find("Transfer-Encoding") == std::string::npos);
  BOOST_TEST(all.find("\r\n\r\ndata: {") != std::string::npos, all);
  BOOST_TEST(all.find("data: [DONE]\n\n") != std::string::npos, all);
}

BOOST_AUTO_TEST_CASE(expect_100_continue_is_answered_before_the_body_is_read) {
  RawClient c(impatient().port());
  const std::string req = post_request("/v1/completions", completion, "HTTP/1.1", "Expect: 100-continue\r\n");
  const auto body_at = req.find("\r\n\r\n") + 4;
  c.send(req.substr(0, body_at));
  BOOST_TEST(c.read_until("\r\n\r\n").rfind("HTTP/1.1 100 Continue\r\n\r\n", 0) == 0u, c.received());
  c.send(req.substr(body_at));
  BOOST_TEST(c.read_until("\"text_completion\"").find("HTTP/1.1 200 OK") != std::string::npos, c.received());
}

BOOST_AUTO_TEST_CASE(an_announced_body_over_the_limit_gets_413_without_100_continue) {
  RawClient c(impatient().port());
  c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\nExpect: 100-continue\r\n\r\n");
  const std::string all = c.read_all();
  BOOST_TEST(all.rfind("HTTP/1.1 413", 0) == 0u, all);
  BOOST_TEST(all.find("100 Continue") == std::string::npos);
  BOOST_TEST(all.find("\"code\":\"body_too_large\"") != std::string::npos, all);
}

BOOST_AUTO_TEST_CASE(a_body_shorter_than_its_content_length_times_out_without_hurting_other_connections) {
  RawClient liar(impatient().port());
  liar.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mo");
  RawClient other(impatient().port());
  other.send(health);
  BOOST_TEST(other.read_until("{\"status\":\"ok\"}").find("200 OK") != std::string::npos);
  BOOST_TEST(liar.closed_within(10), "the server kept a connection whose body never came");
}

BOOST_AUTO_TEST_CASE(a_body_longer_than_its_content_length_is_answered_then_the_rest_refused_as_a_bad_request) {
  RawClient c(impatient().port());
  c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"
         "{}garbage that is no request\r\n\r\n");
  const std::string all = c.read_all();
  BOOST_TEST(all.rfind("HTTP/1.1 400", 0) == 0u, all);  // {} lacks "model"
  BOOST_TEST(count_of(all, "HTTP/1.1 400") == 2u, all);  // then the garbage
  BOOST_TEST(all.find("malformed HTTP request") != std::string::npos, all);
}

BOOST_AUTO_TEST_CASE(a_client_that_stops_halfway_through_its_body_and_leaves_costs_nothing) {
  {
    RawClient c(impatient().port());
    c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"model\":\"falcon-40b\",\"pro");
  }
  RawClient next(impatient().port());
  next.send(post_request("/v1/completions", completion));
  BOOST_TEST(next.read_until("\"text_completion\"").find("HTTP/1.1 200 OK") != std::string::npos, next.received());
}

BOOST_AUTO_TEST_CASE(half_sent_headers_and_idle_keep_alive_connections_are_closed_after_their_timeouts) {
  RawClient half(impatient().port());
  half.send("GET /health HTTP/1.1\r\nHost: x\r\n");
  RawClient idle(impatient().port());
  idle.send(health);
  BOOST_TEST(idle.read_until("{\"status\":\"ok\"}").find("200 OK") != std::string::npos);
  BOOST_TEST(half.closed_within(10));
  BOOST_TEST(idle.closed_within(10));
}

// Bodies over 16 KiB are tokenized on a side thread: both outcomes come back from there.
BOOST_AUTO_TEST_CASE(a_large_body_is_answered_from_the_side_thread_that_tokenizes_it) {
  auto c = impatient().client(30);
  json body = json::parse(streamed);
  const std::string padded = body.dump().insert(1, std::string(20000, ' '));  // JSON whitespace
  const auto r = c.Post("/v1/completions", padded, "application/json");
  BOOST_TEST_REQUIRE(status_of(r) == 200);
  BOOST_TEST(r->body.find("data: [DONE]") != std::string::npos);
  const std::string huge(64 << 10, 'a');
  const auto e = c.Post("/v1/completions", json{{"model", "falcon-40b"}, {"prompt", huge}}.dump(), "application/json");
  BOOST_TEST_REQUIRE(status_of(e) == 400);
  const auto err = json::parse(e->body)["error"];
  BOOST_TEST(err["param"] == "prompt");
  BOOST_TEST(err["code"] == "context_length_exceeded");
}

BOOST_AUTO_TEST_CASE(garbage_instead_of_a_request_line_gets_a_json_400) {
  RawClient c(impatient().port());
  c.send("\x01\x02 not http at all\r\n\r\n");
  const std::string all = c.read_all();
  BOOST_TEST(all.rfind("HTTP/1.1 400", 0) == 0u, all);
  BOOST_TEST(all.find("\"error\":") != std::string::npos, all);
}

BOOST_AUTO_TEST_CASE(connections_over_max_connections_get_a_503_and_the_others_keep_working) {
  ServerProcess small(fake_gpu("max_connections = 4\n"));
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(small.port()));
    held.back()->send(health);
    BOOST_TEST_REQUIRE(held.back()->read_until("{\"status\":\"ok\"}").find("200 OK") != std::string::npos);
  }
  RawClient extra(small.port());
  const std::string all = extra.read_all();
  BOOST_TEST(all.rfind("HTTP/1.1 503", 0) == 0u, all);
  BOOST_TEST(all.find("too_many_connections") != std::string::npos, all);
  held.front()->send(health);
  BOOST_TEST(count_of(held.front()->read_until("{\"status\":\"ok\"}", 2), "HTTP/1.1 200 OK") == 2u);
}

BOOST_AUTO_TEST_CASE(two_thousand_half_sent_connections_leave_health_and_streaming_working) {
  raise_descriptor_limit();
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 2000; ++i) {
    slow.push_back(std::make_unique<RawClient>(patient().port()));
    slow.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n");  // and then nothing
  }
  RawClient probe(patient().port());
  probe.send(health);
  BOOST_TEST(probe.read_until("{\"status\":\"ok\"}").find("200 OK") != std::string::npos);
  auto c = patient().client(30);
  const auto s = post_stream(c, "/v1/completions", json::parse(streamed));
  BOOST_TEST(s.status == 200);
  BOOST_TEST_REQUIRE(!s.data.empty());
  BOOST_TEST(s.data.back() == "[DONE]");
}

// One thread, one event loop, N streaming clients at once: each must see its stream end with
// [DONE] (bounded by a deadline, so a lost stream fails the test instead of hanging it).
BOOST_AUTO_TEST_CASE(a_thousand_concurrent_streams_all_complete_and_free_their_blocks) {
  raise_descriptor_limit();
  namespace asio = boost::asio;
  constexpr int streams = 1000;
  asio::io_context io;
  const auto at = asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(patient().port()));
  const std::string req = post_request("/v1/completions", streamed, "HTTP/1.1", "Connection: close\r\n");
  struct Client {
    asio::ip::tcp::socket socket;
    std::string in;
    char buf[8192];
    bool done = false;
    explicit Client(asio::io_context& io) : socket(io) {}
  };
  std::vector<std::unique_ptr<Client>> clients;
  int completed = 0;
  asio::steady_timer deadline(io, std::chrono::seconds(120));
  std::function<void(Client&)> read = [&](Client& c) {
    c.socket.async_read_some(asio::buffer(c.buf), [&, cp = &c](boost::system::error_code ec, std::size_t n) {
      if (!ec) cp->in.append(cp->buf, n);
      if (!cp->done && cp->in.find("data: [DONE]") != std::string::npos) {
        cp->done = true;
        if (++completed == streams) deadline.cancel();
      }
      if (!ec) read(*cp);
    });
  };
  for (int i = 0; i < streams; ++i) {
    clients.push_back(std::make_unique<Client>(io));
    Client& c = *clients.back();
    c.socket.async_connect(at, [&, cp = &c](boost::system::error_code ec) {
      if (ec) return;
      asio::async_write(cp->socket, asio::buffer(req), [&, cp](boost::system::error_code e, std::size_t) {
        if (!e) read(*cp);
      });
    });
  }
  deadline.async_wait([&](boost::system::error_code ec) {
    if (!ec)
      for (auto& c : clients) c->socket.close();
  });
  io.run_for(std::chrono::seconds(125));
  BOOST_TEST(completed == streams);
  BOOST_TEST(blocks_return_to_zero(patient()));
}
