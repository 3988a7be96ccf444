// parse_request: what valid bodies turn into, and that each kind of bad field is named.
// (The full table of malformed requests runs end to end against the server: server_e2e_test.)
#define BOOST_TEST_MODULE openai_request
#include <boost/test/unit_test.hpp>

#include "actors/http/openai_request.hpp"

using namespace actorlm::http;

namespace {

CompletionRequest ok(Endpoint ep, const std::string& body) {
  auto r = parse_request(ep, body);
  if (auto* e = std::get_if<ApiError>(&r)) BOOST_FAIL("unexpected error: " + e->message);
  return std::get<CompletionRequest>(r);
}

ApiError bad(Endpoint ep, const std::string& body) {
  auto r = parse_request(ep, body);
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<ApiError>(r), "accepted: " + body);
  return std::get<ApiError>(r);
}

}  // namespace

BOOST_AUTO_TEST_CASE(parses_every_supported_completions_field) {
  const auto r = ok(Endpoint::completions,
                    R"({"model":"m","prompt":["a","b"],"max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":40,)"
                    R"("min_p":0.05,"n":3,"stop":["x","yz"],"seed":-4,"logprobs":2,"presence_penalty":0,)"
                    R"("frequency_penalty":0.0,"user":"u","priority":-2,"stream":true,"stream_options":{"include_usage":true}})");
  BOOST_TEST(r.model == "m");
  BOOST_TEST(r.prompts.size() == 2u);
  BOOST_TEST(r.prompts[1].text == "b");
  BOOST_TEST(*r.max_tokens == 7u);
  BOOST_TEST(r.temperature == 0.5f);
  BOOST_TEST(r.top_p == 0.9f);
  BOOST_TEST(r.top_k == 40);
  BOOST_TEST(r.min_p == 0.05f);
  BOOST_TEST(r.n == 3u);
  BOOST_TEST(r.stop.size() == 2u);
  BOOST_TEST(*r.seed == static_cast<std::uint64_t>(-4));
  BOOST_TEST(r.logprobs);
  BOOST_TEST(r.top_logprobs == 2u);
  BOOST_TEST(r.priority == -2);
  BOOST_TEST(r.stream);
  BOOST_TEST(r.include_usage);
}

BOOST_AUTO_TEST_CASE(takes_token_id_prompts_single_and_batched) {
  const auto one = ok(Endpoint::completions, R"({"model":"m","prompt":[1,2,3]})");
  BOOST_TEST(one.prompts.size() == 1u);
  BOOST_TEST(one.prompts[0].is_tokens);
  BOOST_TEST(one.prompts[0].tokens.size() == 3u);
  const auto two = ok(Endpoint::completions, R"({"model":"m","prompt":[[1],[2,3]]})");
  BOOST_TEST(two.prompts.size() == 2u);
  BOOST_TEST(two.prompts[1].tokens[1] == 3);
}

BOOST_AUTO_TEST_CASE(parses_chat_messages_with_text_parts_and_defaults) {
  const auto r = ok(Endpoint::chat,
                    R"({"model":"m","messages":[{"role":"developer","content":"be brief"},)"
                    R"({"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],)"
                    R"("max_completion_tokens":5,"logprobs":true,"top_logprobs":3,"stop":"\n","temperature":null})");
  BOOST_TEST(r.messages.size() == 2u);
  BOOST_TEST(r.messages[0].role == "system");
  BOOST_TEST(r.messages[1].content == "hi there");
  BOOST_TEST(*r.max_tokens == 5u);
  BOOST_TEST(r.logprobs);
  BOOST_TEST(r.top_logprobs == 3u);
  BOOST_TEST(r.stop.at(0) == "\n");
  BOOST_TEST(r.temperature == 1.0f, "null means absent: the default");
  BOOST_TEST(r.n == 1u);
  BOOST_TEST(!r.stream);
}

BOOST_AUTO_TEST_CASE(names_the_field_and_the_value_of_a_bad_parameter) {
  const auto e = bad(Endpoint::completions, R"({"model":"m","prompt":"x","temperature":3})");
  BOOST_TEST(e.status == 400);
  BOOST_TEST(e.param == "temperature");
  BOOST_TEST(e.message == "temperature: must be in [0, 2], found 3");
  const auto t = bad(Endpoint::chat, R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":"2"})");
  BOOST_TEST(t.param == "n");
  BOOST_TEST(t.message == "n: expected an integer in [1, 128], found a string");
  const auto m = bad(Endpoint::chat, R"({"model":"m","messages":[{"role":"user"}]})");
  BOOST_TEST(m.param == "messages[0].content");
}

BOOST_AUTO_TEST_CASE(refuses_unknown_fields_and_fields_of_the_other_endpoint) {
  BOOST_TEST(bad(Endpoint::completions, R"({"model":"m","prompt":"x","temprature":1})").param == "temprature");
  BOOST_TEST(bad(Endpoint::completions, R"({"model":"m","prompt":"x","messages":[]})").param == "messages");
  BOOST_TEST(bad(Endpoint::chat, R"({"model":"m","messages":[{"role":"user","content":"x"}],"prompt":"x"})").param == "prompt");
}

BOOST_AUTO_TEST_CASE(reports_invalid_json_without_a_param) {
  const auto e = bad(Endpoint::completions, R"({"model":"m",)");
  BOOST_TEST(e.status == 400);
  BOOST_TEST(e.code == "invalid_json");
  BOOST_TEST(e.message.find("not valid JSON") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(renders_errors_in_openai_shape) {
  const ApiError e = bad_field("top_p", "top_p: must be in (0, 1], found 0");
  BOOST_TEST(e.to_json() ==
             R"({"error":{"code":"invalid_value","message":"top_p: must be in (0, 1], found 0","param":"top_p","type":"invalid_request_error"}})");
}
