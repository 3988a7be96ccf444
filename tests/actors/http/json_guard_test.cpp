// Bodies that are broken below the level of fields (bad UTF-8, nesting, numbers out of range,
// duplicate keys, syntax): each is a 400 that names the field, through parse_request, and every
// error renders as JSON whatever bytes it quotes.
#define BOOST_TEST_MODULE json_guard
#include "actors/http/json_guard.hpp"
#include "actors/http/openai_request.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <chrono>

using namespace actorlm::http;
namespace data = boost::unit_test::data;

namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

const std::string M = R"("model":"m")";
const std::string U = R"("messages":[{"role":"user","content":"hi"}])";

struct BadBody {
  const char* name;
  Endpoint endpoint;
  std::string body;
  std::string param;    // expected "param"
  std::string message;  // a substring of the message
};
std::ostream& operator<<(std::ostream& os, const BadBody& b) { return os << b.name; }

const std::vector<BadBody> bad_bodies = {
    // Invalid UTF-8 in string values: the field that holds it.
    {"utf8_prompt", Endpoint::completions, "{" + M + ",\"prompt\":\"ab\xff" "cd\"}", "prompt", "prompt: not valid UTF-8 (byte 0xFF at offset 25 of the body)"},
    {"utf8_prompt_list", Endpoint::completions, "{" + M + ",\"prompt\":[\"ok\",\"\xfe\"]}", "prompt[1]", "not valid UTF-8 (byte 0xFE"},
    {"utf8_message_content", Endpoint::chat, "{" + M + R"(,"messages":[{"role":"user","content":"hi )" "\xc3\x28\"}]}",
     "messages[0].content", "messages[0].content: not valid UTF-8 (byte 0xC3"},
    {"utf8_content_part", Endpoint::chat,
     "{" + M + R"(,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":")" "\x80\"}]}]}",
     "messages[1].content[0].text", "not valid UTF-8 (byte 0x80"},
    {"utf8_role", Endpoint::chat, "{" + M + R"(,"messages":[{"role":"us)" "\xe9r\",\"content\":\"x\"}]}", "messages[0].role",
     "not valid UTF-8"},
    {"utf8_model", Endpoint::completions, "{\"model\":\"m\xf5\",\"prompt\":\"x\"}", "model", "model: not valid UTF-8 (byte 0xF5"},
    {"utf8_stop", Endpoint::completions, "{" + M + ",\"prompt\":\"x\",\"stop\":[\"\xff\"]}", "stop[0]", "not valid UTF-8"},
    {"utf8_user", Endpoint::chat, "{" + M + "," + U + ",\"user\":\"\xc0\"}", "user", "not valid UTF-8 (byte 0xC0"},
    {"utf8_overlong_slash", Endpoint::completions, "{" + M + ",\"prompt\":\"\xc0\xaf\"}", "prompt", "not valid UTF-8 (byte 0xC0"},
    {"utf8_encoded_surrogate", Endpoint::completions, "{" + M + ",\"prompt\":\"\xed\xa0\x80\"}", "prompt", "not valid UTF-8 (byte 0xED"},
    {"utf8_above_u10ffff", Endpoint::completions, "{" + M + ",\"prompt\":\"\xf4\x90\x80\x80\"}", "prompt", "not valid UTF-8 (byte 0xF4"},
    {"utf8_sequence_cut_by_the_quote", Endpoint::completions, "{" + M + ",\"prompt\":\"\xe2\x82\"}", "prompt", "not valid UTF-8 (byte 0xE2"},
    {"utf8_byte_where_a_value_belongs", Endpoint::completions, "{" + M + ",\"prompt\":\xff}", "prompt", "not valid UTF-8 (byte 0xFF"},
    // ...in keys: the key, its bad bytes written as \xNN.
    {"utf8_top_level_key", Endpoint::completions, "{\"mo\xff" "del\":\"m\",\"prompt\":\"x\"}", "mo\\xFFdel",
     "mo\\xFFdel: the key is not valid UTF-8 (byte 0xFF at offset 4"},
    {"utf8_nested_key", Endpoint::completions, "{" + M + ",\"prompt\":\"x\",\"stream\":true,\"stream_options\":{\"inc\xc3lude_usage\":true}}",
     "stream_options.inc\\xC3lude_usage", "the key is not valid UTF-8 (byte 0xC3"},
    {"utf8_message_key", Endpoint::chat, "{" + M + ",\"messages\":[{\"role\":\"user\",\"con\xa0tent\":\"x\"}]}",
     "messages[0].con\\xA0tent", "the key is not valid UTF-8"},
    {"utf8_byte_where_a_key_belongs", Endpoint::completions, "{" + M + ",\xff}", "body", "not valid UTF-8 where a key was expected"},
    // Nesting deeper than 64 arrays and objects (the top-level object is the first).
    {"deep_prompt_arrays", Endpoint::completions, "{" + M + ",\"prompt\":" + repeat("[", 100) + repeat("]", 100) + "}",
     "prompt" + repeat("[0]", 63), "nested more than 64 arrays and objects deep"},
    {"deep_objects", Endpoint::chat, "{" + M + "," + U + ",\"x\":" + repeat("{\"a\":", 70) + "1" + repeat("}", 70) + "}",
     "x" + repeat(".a", 63), "nested more than 64"},
    {"deep_open_brackets_only", Endpoint::completions, repeat("[", 100000), "body" + repeat("[0]", 64), "nested more than 64"},
    // Numbers no double or 64-bit integer holds (each numeric field's own range: the next test).
    {"float_overflow", Endpoint::completions, "{" + M + ",\"prompt\":\"x\",\"temperature\":1e400}", "temperature",
     "temperature: 1e400 is out of range for a number"},
    {"integer_past_64_bits", Endpoint::completions, "{" + M + ",\"prompt\":[1,123456789012345678901234567890]}", "prompt[1]",
     "123456789012345678901234567890 is out of range (integers must be in [-2^63, 2^64))"},
    {"huge_literal_is_cut_in_the_message", Endpoint::completions, "{" + M + ",\"prompt\":\"x\",\"n\":" + repeat("9", 5000) + "}", "n",
     "n: " + repeat("9", 40) + "... is out of range"},
    // A key given twice in one object.
    {"duplicate_top_level_key", Endpoint::completions, "{" + M + ",\"prompt\":\"x\"," + M + "}", "model", "model: duplicate key"},
    {"duplicate_stream_option", Endpoint::completions,
     "{" + M + R"(,"prompt":"x","stream":true,"stream_options":{"include_usage":true,"include_usage":false}})",
     "stream_options.include_usage", "duplicate key"},
    {"duplicate_message_role", Endpoint::chat, "{" + M + R"(,"messages":[{"role":"user","role":"system","content":"x"}]})",
     "messages[0].role", "duplicate key"},
    {"duplicate_content_part_text", Endpoint::chat,
     "{" + M + R"(,"messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]})",
     "messages[0].content[0].text", "duplicate key"},
};

ApiError refused(Endpoint ep, const std::string& body) {
  auto r = parse_request(ep, body);
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<ApiError>(r), "accepted: " + body);
  return std::get<ApiError>(r);
}

// What a client would read: the error rendered strictly (a raw byte would throw here).
void renders_as_strict_json(const ApiError& e) {
  BOOST_CHECK_NO_THROW(nlohmann::json::parse(e.to_json()).dump());
  BOOST_CHECK_NO_THROW(nlohmann::json(e.message).dump());
  BOOST_CHECK_NO_THROW(nlohmann::json(e.param).dump());
}

struct NumericField {
  const char* name;
  Endpoint endpoint;
};
std::ostream& operator<<(std::ostream& os, const NumericField& f) { return os << f.name; }

const std::vector<NumericField> numeric_fields = {
    {"max_tokens", Endpoint::completions}, {"temperature", Endpoint::completions}, {"top_p", Endpoint::completions},
    {"top_k", Endpoint::completions}, {"min_p", Endpoint::completions}, {"n", Endpoint::completions},
    {"seed", Endpoint::completions}, {"logprobs", Endpoint::completions}, {"presence_penalty", Endpoint::completions},
    {"frequency_penalty", Endpoint::completions}, {"priority", Endpoint::completions},
    {"max_completion_tokens", Endpoint::chat}, {"top_logprobs", Endpoint::chat}};

// Out of range for every numeric field, seed's 64 bits included.
const std::vector<std::string> extreme_numbers = {
    "1e400", "-1e400", "1e300", "-1e300", "1e19", "-1e19", "99999999999999999999", "-99999999999999999999",
    "18446744073709551616", "18446744073709551615", "9223372036854775808", "-9223372036854775809"};

std::string body_with(const NumericField& f, const std::string& value) {
  return "{" + M + "," + (f.endpoint == Endpoint::chat ? U + ",\"logprobs\":true" : std::string("\"prompt\":\"x\"")) + ",\"" +
         f.name + "\":" + value + "}";
}

}  // namespace

BOOST_DATA_TEST_CASE(a_broken_body_is_a_400_naming_the_field, data::make(bad_bodies), b) {
  const auto start = std::chrono::steady_clock::now();
  const ApiError e = refused(b.endpoint, b.body);
  BOOST_TEST(e.status == 400);
  BOOST_TEST(e.param == b.param);
  BOOST_TEST(e.message.find(b.message) != std::string::npos, e.message);
  BOOST_TEST(e.code == "invalid_value");
  renders_as_strict_json(e);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 1.0);
}

BOOST_DATA_TEST_CASE(a_number_out_of_range_is_a_400_naming_its_field_for_every_numeric_field,
                     data::make(numeric_fields) * data::make(extreme_numbers), field, value) {
  const ApiError e = refused(field.endpoint, body_with(field, value));
  BOOST_TEST(e.status == 400);
  BOOST_TEST(e.param == field.name);
  BOOST_TEST(e.message.rfind(std::string(field.name) + ": ", 0) == 0u, e.message);
  renders_as_strict_json(e);
}

BOOST_DATA_TEST_CASE(a_32_bit_field_never_wraps_a_value_past_2_to_the_32,
                     data::make(std::vector<std::string>{"max_tokens", "n", "logprobs", "top_k", "priority"}), field) {
  // 2^32 + 1 would be 1 after a cast to 32 bits: a valid value for each of these.
  const ApiError e = refused(Endpoint::completions, "{" + M + ",\"prompt\":\"x\",\"" + field + "\":4294967297}");
  BOOST_TEST(e.param == field);
  BOOST_TEST(e.message.find("found 4294967297") != std::string::npos, e.message);
}

BOOST_AUTO_TEST_CASE(the_same_key_in_different_objects_is_not_a_duplicate) {
  const auto r = parse_request(Endpoint::chat, "{" + M + R"(,"messages":[{"role":"system","content":"a"},{"role":"user","content":"b"}]})");
  BOOST_TEST(std::holds_alternative<CompletionRequest>(r));
}

BOOST_AUTO_TEST_CASE(valid_utf8_of_every_length_and_escaped_surrogate_pairs_pass) {
  const auto r = parse_request(Endpoint::completions,
                               "{" + M + ",\"prompt\":\"a \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \\ud83d\\ude00 \xf4\x8f\xbf\xbf\"}");
  BOOST_REQUIRE(std::holds_alternative<CompletionRequest>(r));
  BOOST_TEST(std::get<CompletionRequest>(r).prompts[0].text == "a \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
}

BOOST_AUTO_TEST_CASE(nesting_up_to_the_limit_passes_the_guard) {
  const std::string at_limit = repeat("[", 64) + repeat("]", 64);
  BOOST_TEST(!check_json_body(at_limit).has_value());
  BOOST_TEST(check_json_body("[" + at_limit + "]").has_value());
  BOOST_TEST(!check_json_body("[" + at_limit + "]", JsonLimits{65}).has_value());
}

BOOST_AUTO_TEST_CASE(syntax_errors_are_invalid_json_with_where_they_are_but_no_param) {
  for (const std::string& body : std::vector<std::string>{"{" + M + ",", "{\"model\":", "{" + M + ",\"prompt\":\"x\"} trailing", std::string(),
                                 "{" + M + ",\"prompt\":\"\\ud800\"}", "{" + M + ",\"prompt\":\"\xe2\x82"}) {
    const ApiError e = refused(Endpoint::completions, body);
    BOOST_TEST(e.status == 400);
    BOOST_TEST(e.code == "invalid_json");
    BOOST_TEST(e.param.empty());
    BOOST_TEST(e.message.find("the body is not valid JSON") == 0u, e.message);
    renders_as_strict_json(e);
  }
  BOOST_TEST(refused(Endpoint::completions, "{\"model\":").message.find("(in model)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_syntax_error_quoting_bad_bytes_quotes_them_escaped) {
  // A string cut by the end of the body, inside a character: the lexer's message quotes it.
  const ApiError e = refused(Endpoint::completions, "{" + M + ",\"prompt\":\"\xe2\x82");
  BOOST_TEST(e.message.find("\\xE2\\x82") != std::string::npos, e.message);
}

BOOST_AUTO_TEST_CASE(an_error_message_holding_bad_utf8_still_renders) {
  // The server's 500 path quotes exception text; rendering must never throw on it.
  const ApiError e{500, "internal error: \xff\xfe", "server_error", "", "internal_error"};
  std::string json;
  BOOST_REQUIRE_NO_THROW(json = e.to_json());
  BOOST_TEST(nlohmann::json::parse(json)["error"]["message"] == "internal error: \xef\xbf\xbd\xef\xbf\xbd");
}

BOOST_AUTO_TEST_CASE(quote_safely_escapes_bad_bytes_and_cuts_at_a_character) {
  BOOST_TEST(quote_safely("a\xff" "b") == "a\\xFFb");
  BOOST_TEST(quote_safely("\xc3\xa9\xc3\xa9", 3) == "\xc3\xa9...");
  BOOST_TEST(quote_safely("abc", 3) == "abc");
}
