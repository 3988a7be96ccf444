// End to end: malformed and refused requests against the real server get OpenAI-shaped errors
// with the right status, the offending field and a message that says why.
#define BOOST_TEST_MODULE server_errors
#include "tests/actors/http/server_process.hpp"

#include <boost/test/data/test_case.hpp>

using namespace actorlm::testing;
namespace data = boost::unit_test::data;

namespace {

ServerProcess& server() {
  static ServerProcess s;
  return s;
}

struct BadRequest {
  const char* name;
  const char* path;
  std::string body;
  int status;
  const char* param;    // expected "param" ("" for null)
  const char* message;  // a substring of the message
};
std::ostream& operator<<(std::ostream& os, const BadRequest& b) { return os << b.name; }

const std::string M = R"("model":"SmolLM2-135M-Instruct")";
const std::string U = R"("messages":[{"role":"user","content":"hi"}])";
const char* C = "/v1/completions";
const char* H = "/v1/chat/completions";

std::string long_prompt(int tokens) {
  std::string ids;
  for (int i = 0; i < tokens; ++i) ids += (i ? "," : "") + std::to_string(100 + i % 1000);
  return "[" + ids + "]";
}

const std::vector<BadRequest> cases = {
    {"invalid_json", C, "{\"model\":", 400, "", "not valid JSON"},
    {"body_not_an_object", C, "[1,2]", 400, "body", "expected a JSON object, found an array"},
    {"model_not_a_string", C, R"({"model":7,"prompt":"x"})", 400, "model", "model: expected a string, found an integer"},
    {"model_not_a_string", C, R"({"model":3,"prompt":"x"})", 400, "model", "expected a string, found an integer"},
    {"unknown_model", C, R"({"model":"gpt-9","prompt":"x"})", 404, "model", "\"gpt-9\" is not served here"},
    {"missing_prompt", C, "{" + M + "}", 400, "prompt", "prompt: missing"},
    {"prompt_an_object", C, "{" + M + R"(,"prompt":{"a":1}})", 400, "prompt", "expected a string, an array of strings, or token ids"},
    {"prompt_empty_array", C, "{" + M + R"(,"prompt":[]})", 400, "prompt", "must not be an empty array"},
    {"prompt_negative_token", C, "{" + M + R"(,"prompt":[1,-1]})", 400, "prompt[1]", "must be in [0, 2147483647], found -1"},
    {"prompt_token_outside_vocabulary", C, "{" + M + R"(,"prompt":[1,49152]})", 400, "prompt", "token id 49152 is outside the vocabulary [0, 49152)"},
    {"prompt_over_context", C, "{" + M + R"(,"prompt":)" + long_prompt(2048) + "}", 400, "prompt", "the prompt has 2048 tokens; the context length is 2048"},
    {"prompt_plus_max_tokens_over_context", C, "{" + M + R"(,"prompt":)" + long_prompt(2000) + R"(,"max_tokens":100})", 400, "max_tokens",
     "the prompt (2000 tokens) plus max_tokens (100) is more than the context length (2048)"},
    {"missing_messages", H, "{" + M + "}", 400, "messages", "messages: missing"},
    {"messages_empty", H, "{" + M + R"(,"messages":[]})", 400, "messages", "must not be empty"},
    {"message_bad_role", H, "{" + M + R"(,"messages":[{"role":"robot","content":"x"}]})", 400, "messages[0].role", "found \"robot\""},
    {"message_without_content", H, "{" + M + R"(,"messages":[{"role":"user"}]})", 400, "messages[0].content", "missing"},
    {"message_image_part", H, "{" + M + R"(,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})", 400,
     "messages[0].content[0].type", "only \"text\" content parts are supported"},
    {"max_tokens_zero", C, "{" + M + R"(,"prompt":"x","max_tokens":0})", 400, "max_tokens", "must be in [1, 16777216], found 0"},
    {"max_tokens_a_string", H, "{" + M + "," + U + R"(,"max_tokens":"5"})", 400, "max_tokens", "expected an integer"},
    {"temperature_negative", C, "{" + M + R"(,"prompt":"x","temperature":-1})", 400, "temperature", "must be in [0, 2], found -1"},
    {"top_p_zero", C, "{" + M + R"(,"prompt":"x","top_p":0})", 400, "top_p", "must be in (0, 1], found 0"},
    {"top_k_below_minus_one", C, "{" + M + R"(,"prompt":"x","top_k":-2})", 400, "top_k", "found -2"},
    {"min_p_above_one", C, "{" + M + R"(,"prompt":"x","min_p":2})", 400, "min_p", "must be in [0, 1], found 2"},
    {"n_zero", C, "{" + M + R"(,"prompt":"x","n":0})", 400, "n", "must be in [1, 128], found 0"},
    {"n_fractional", C, "{" + M + R"(,"prompt":"x","n":1.5})", 400, "n", "expected an integer in [1, 128], found 1.5"},
    {"stop_a_number", C, "{" + M + R"(,"prompt":"x","stop":5})", 400, "stop", "expected a string or an array of strings"},
    {"stop_empty_string", C, "{" + M + R"(,"prompt":"x","stop":[""]})", 400, "stop", "must not be empty"},
    {"completion_logprobs_above_five", C, "{" + M + R"(,"prompt":"x","logprobs":6})", 400, "logprobs", "must be in [0, 5], found 6"},
    {"chat_top_logprobs_without_logprobs", H, "{" + M + "," + U + R"(,"top_logprobs":2})", 400, "top_logprobs", "needs \"logprobs\": true"},
    {"presence_penalty_a_string", C, "{" + M + R"(,"prompt":"x","presence_penalty":"high"})", 400, "presence_penalty", "expected a number in [-2, 2], found a string"},
    {"frequency_penalty_out_of_range", C, "{" + M + R"(,"prompt":"x","frequency_penalty":3})", 400, "frequency_penalty", "must be in [-2, 2], found 3"},
    {"stream_a_string", C, "{" + M + R"(,"prompt":"x","stream":"yes"})", 400, "stream", "expected a boolean, found a string"},
    {"stream_options_without_stream", C, "{" + M + R"(,"prompt":"x","stream_options":{"include_usage":true}})", 400, "stream_options",
     "only allowed with \"stream\": true"},
    {"seed_a_string", C, "{" + M + R"(,"prompt":"x","seed":"abc"})", 400, "seed", "expected an integer"},
    {"unknown_field", C, "{" + M + R"(,"prompt":"x","temprature":1})", 400, "temprature", "unknown or unsupported field"},
    {"chat_field_on_completions", C, "{" + M + R"(,"prompt":"x","max_completion_tokens":3})", 400, "max_completion_tokens", "unknown or unsupported"},
    {"max_tokens_and_max_completion_tokens_differ", H, "{" + M + "," + U + R"(,"max_tokens":3,"max_completion_tokens":4})", 400,
     "max_completion_tokens", "differs from max_tokens (3)"},
    {"unknown_path", "/v1/engines", "{}", 404, "", "no route for POST /v1/engines"},
    // Broken below the fields (json_guard): once a 500 (bad UTF-8) or a 500 (1e400), or silent.
    {"prompt_invalid_utf8", C, "{" + M + ",\"prompt\":\"caf\xe9\"}", 400, "prompt", "prompt: not valid UTF-8 (byte 0xE9"},
    {"temperature_past_a_double", C, "{" + M + R"(,"prompt":"x","temperature":1e400})", 400, "temperature", "out of range"},
    {"duplicate_key", H, "{" + M + "," + U + "," + M + "}", 400, "model", "model: duplicate key"},
};

}  // namespace

BOOST_DATA_TEST_CASE(refuses_a_malformed_request_naming_the_field, data::make(cases), c) {
  auto client = server().client();
  auto r = client.Post(c.path, c.body, "application/json");
  BOOST_REQUIRE(r);
  BOOST_TEST(r->status == c.status);
  BOOST_TEST(r->get_header_value("Content-Type") == "application/json");
  const json e = json::parse(r->body).at("error");
  const std::string message = e.at("message");
  BOOST_TEST(message.find(c.message) != std::string::npos, "message: " << message);
  BOOST_TEST((std::string(c.param).empty() ? e.at("param").is_null() : e.at("param") == c.param), "param: " << e.at("param"));
  BOOST_TEST(e.at("type").is_string());
}

BOOST_AUTO_TEST_CASE(table_holds_at_least_twenty_five_requests) { BOOST_TEST(cases.size() >= 25u); }

BOOST_AUTO_TEST_CASE(a_malformed_request_leaves_the_server_serving) {
  auto client = server().client();
  auto r = post_json(client, "/v1/completions",
                     {{"model", "SmolLM2-135M-Instruct"}, {"prompt", "The capital of France is"}, {"max_tokens", 2}, {"temperature", 0}});
  BOOST_REQUIRE(r);
  BOOST_TEST(r->status == 200);
  auto m = client.Get("/metrics");
  BOOST_REQUIRE(m);
  BOOST_TEST(metric(m->body, "actorlm_kv_cache_used_blocks") == 0, "no block leaked by refused requests");
}

// A second server: API key, 1 KiB bodies, one running and one waiting request at most.
BOOST_AUTO_TEST_CASE(key_body_limit_and_full_queue_get_401_413_and_429) {
  ServerProcess s("[server]\napi_key = \"sesame\"\nmax_body_bytes = 1024\n"
                  "[scheduler]\nmax_num_seqs = 1\nmax_queue_len = 1\n");
  auto c = s.client();
  const json body{{"model", "SmolLM2-135M-Instruct"}, {"prompt", "Hello"}, {"max_tokens", 1}};
  auto none = post_json(c, "/v1/completions", body);
  BOOST_REQUIRE(none);
  BOOST_TEST(none->status == 401);
  BOOST_TEST(json::parse(none->body)["error"]["type"] == "authentication_error");
  c.set_bearer_token_auth("wrong");
  BOOST_TEST(status_of(post_json(c, "/v1/completions", body)) == 401);
  c.set_bearer_token_auth("sesame");
  BOOST_TEST(status_of(post_json(c, "/v1/completions", body)) == 200);
  auto big = c.Post("/v1/completions", std::string(2000, ' ') + body.dump(), "application/json");
  BOOST_REQUIRE(big);
  BOOST_TEST(big->status == 413);
  BOOST_TEST(json::parse(big->body)["error"]["code"] == "body_too_large");

  // One long request runs, a second waits, the third finds the queue full. Both hang up once
  // `release` is set (the server notices at its next write).
  std::atomic<bool> started{false}, release{false};
  auto hold = [&](const char* prompt) {
    auto cl = s.client();
    cl.set_bearer_token_auth("sesame");
    post_stream(cl, "/v1/completions",
                {{"model", "SmolLM2-135M-Instruct"}, {"prompt", prompt}, {"max_tokens", 1000}, {"stream", true}},
                [&](const Stream& st) {
                  if (!st.data.empty()) started = true;
                  return !release.load();
                });
  };
  std::thread first(hold, "Count:");
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::thread second(hold, "Wait");
  // The waiting one shows up in the metrics before the third is sent.
  auto waiting = [&] {
    auto m = c.Get("/metrics");
    return m ? metric(m->body, "actorlm_num_requests_waiting") : -1.0;
  };
  for (int i = 0; i < 500 && waiting() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto full = post_json(c, "/v1/completions", body);
  release = true;
  BOOST_REQUIRE(full);
  BOOST_TEST(full->status == 429);
  BOOST_TEST(full->get_header_value("Retry-After") == "1");
  BOOST_TEST(json::parse(full->body)["error"]["code"] == "queue_full");
  first.join();
  second.join();
}
