// parse_request: what valid bodies turn into, and that each kind of bad field is named.
// (The full table of malformed requests runs end to end against the server: server_e2e_test.)
#define BOOST_TEST_MODULE openai_request
#include <boost/test/unit_test.hpp>

#include "actors/http/openai_request.hpp"
#include "tests/actors/http/parse_helpers.hpp"

using namespace actorlm::http;

namespace {

CompletionRequest ok(Endpoint ep, const std::string& body) { return actorlm::testing::parse_ok(ep, body); }
ApiError bad(Endpoint ep, const std::string& body) { return actorlm::testing::parse_bad(ep, body); }

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

BOOST_AUTO_TEST_CASE(parses_vllms_sampling_extensions_on_both_endpoints) {
  const std::string fields =
      R"("ignore_eos":true,"min_tokens":3,"stop_token_ids":[2,7],"include_stop_str_in_output":true,)"
      R"("skip_special_tokens":false,"spaces_between_special_tokens":false,"repetition_penalty":1.3,)"
      R"("return_tokens_as_token_ids":true,"add_special_tokens":false,"logit_bias":{"5":-100,"11":2.5},"best_of":3,"n":2)";
  for (const auto ep : {Endpoint::completions, Endpoint::chat}) {
    const std::string body = ep == Endpoint::chat ? R"({"model":"m","messages":[{"role":"user","content":"x"}],)" + fields + "}"
                                                  : R"({"model":"m","prompt":"x",)" + fields + "}";
    const auto r = ok(ep, body);
    BOOST_TEST(r.ignore_eos);
    BOOST_TEST(r.min_tokens == 3u);
    BOOST_TEST((r.stop_token_ids == std::vector<std::int64_t>{2, 7}));
    BOOST_TEST(r.include_stop_str_in_output);
    BOOST_TEST(!r.skip_special_tokens);
    BOOST_TEST(!r.spaces_between_special_tokens);
    BOOST_TEST(r.repetition_penalty == 1.3f);
    BOOST_TEST(r.return_tokens_as_token_ids);
    BOOST_TEST(!r.add_special_tokens);
    BOOST_TEST_REQUIRE(r.logit_bias.size() == 2u);
    BOOST_TEST(r.logit_bias[0].first == 11);  // keys sorted as strings
    BOOST_TEST(r.logit_bias[1].second == -100.0f);
    BOOST_TEST(*r.best_of == 3u);
    BOOST_TEST(r.samples_per_prompt() == 3u);
  }
}

BOOST_AUTO_TEST_CASE(vllm_extensions_default_as_vllm_does) {
  const auto c = ok(Endpoint::completions, R"({"model":"m","prompt":"x"})");
  BOOST_TEST(c.add_special_tokens);  // completions: BOS added
  BOOST_TEST(c.skip_special_tokens);
  BOOST_TEST(c.repetition_penalty == 1.0f);
  BOOST_TEST(!c.best_of);
  BOOST_TEST(c.samples_per_prompt() == 1u);
  const auto chat = ok(Endpoint::chat, R"({"model":"m","messages":[{"role":"user","content":"x"}]})");
  BOOST_TEST(!chat.add_special_tokens);  // chat: the template writes them
  BOOST_TEST(chat.add_generation_prompt);
  BOOST_TEST(!chat.continue_final_message);
}

BOOST_AUTO_TEST_CASE(echo_is_a_completions_field_and_with_logprobs_asks_for_the_prompts_too) {
  BOOST_TEST(ok(Endpoint::completions, R"({"model":"m","prompt":"x","echo":true})").echo);
  BOOST_TEST(bad(Endpoint::chat, R"({"model":"m","messages":[{"role":"user","content":"x"}],"echo":true})").param == "echo");
  const auto r = ok(Endpoint::completions, R"({"model":"m","prompt":"x","echo":true,"logprobs":3})");
  BOOST_TEST((r.echo && r.logprobs && r.top_logprobs == 3u));
}

// vLLM's prompt_logprobs: k in [0, 20] on both endpoints; its -1 (the whole vocabulary), more
// than 20, and streaming are refused naming the field.
BOOST_AUTO_TEST_CASE(prompt_logprobs_takes_up_to_20_alternatives_and_no_stream) {
  BOOST_TEST(*ok(Endpoint::completions, R"({"model":"m","prompt":"x","prompt_logprobs":0})").prompt_logprobs == 0u);
  BOOST_TEST(*ok(Endpoint::chat, R"({"model":"m","messages":[{"role":"user","content":"x"}],"prompt_logprobs":20})")
                  .prompt_logprobs == 20u);
  BOOST_TEST(!ok(Endpoint::completions, R"({"model":"m","prompt":"x","prompt_logprobs":null})").prompt_logprobs);
  for (const char* bad_value : {"-1", "21", "1.5", "\"2\"", "-2"})
    BOOST_TEST(bad(Endpoint::completions, std::string(R"({"model":"m","prompt":"x","prompt_logprobs":)") + bad_value + "}").param ==
               "prompt_logprobs", bad_value);
  const auto streamed = bad(Endpoint::completions, R"({"model":"m","prompt":"x","stream":true,"prompt_logprobs":1})");
  BOOST_TEST(streamed.param == "prompt_logprobs");
  BOOST_TEST(streamed.message.find("stream") != std::string::npos, streamed.message);
}

BOOST_AUTO_TEST_CASE(chat_template_switches_and_kwargs_override_them) {
  const std::string m = R"("model":"m","messages":[{"role":"user","content":"x"}])";
  const auto cont = ok(Endpoint::chat, "{" + m + R"(,"add_generation_prompt":false,"continue_final_message":true})");
  BOOST_TEST(!cont.add_generation_prompt);
  BOOST_TEST(cont.continue_final_message);
  const auto kw = ok(Endpoint::chat, "{" + m + R"(,"chat_template_kwargs":{"add_generation_prompt":false,"enable_thinking":false}})");
  BOOST_TEST(!kw.add_generation_prompt);
  const auto both = bad(Endpoint::chat, "{" + m + R"(,"continue_final_message":true})");
  BOOST_TEST(both.param == "continue_final_message");
  BOOST_TEST(bad(Endpoint::chat, "{" + m + R"(,"chat_template_kwargs":[1]})").param == "chat_template_kwargs");
  BOOST_TEST(bad(Endpoint::chat, "{" + m + R"(,"chat_template_kwargs":{"add_generation_prompt":1}})").param ==
             "chat_template_kwargs.add_generation_prompt");
  BOOST_TEST(bad(Endpoint::completions, R"({"model":"m","prompt":"x","add_generation_prompt":false})").param ==
             "add_generation_prompt");
}

BOOST_AUTO_TEST_CASE(continuous_usage_stats_puts_usage_in_every_chunk_and_implies_include_usage) {
  const auto r = ok(Endpoint::completions,
                    R"({"model":"m","prompt":"x","stream":true,"stream_options":{"continuous_usage_stats":true}})");
  BOOST_TEST(r.continuous_usage_stats);
  BOOST_TEST(r.include_usage);
  const auto off = ok(Endpoint::completions,
                      R"({"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":false,"continuous_usage_stats":true}})");
  BOOST_TEST(!off.continuous_usage_stats);  // vLLM: only with include_usage
  BOOST_TEST(bad(Endpoint::completions, R"({"model":"m","prompt":"x","stream":true,"stream_options":{"continuous_usage_stats":1}})")
                 .param == "stream_options.continuous_usage_stats");
}

BOOST_AUTO_TEST_CASE(names_each_bad_extension_field) {
  const auto field_of = [](const std::string& extra) {
    return bad(Endpoint::completions, R"({"model":"m","prompt":"x",)" + extra + "}").param;
  };
  BOOST_TEST(field_of(R"("ignore_eos":1)") == "ignore_eos");
  BOOST_TEST(field_of(R"("min_tokens":-1)") == "min_tokens");
  BOOST_TEST(field_of(R"("max_tokens":4,"min_tokens":5)") == "min_tokens");
  BOOST_TEST(field_of(R"("stop_token_ids":3)") == "stop_token_ids");
  BOOST_TEST(field_of(R"("stop_token_ids":[1,-2])") == "stop_token_ids[1]");
  BOOST_TEST(field_of(R"("repetition_penalty":0)") == "repetition_penalty");
  BOOST_TEST(field_of(R"("repetition_penalty":"1")") == "repetition_penalty");
  BOOST_TEST(field_of(R"("repetition_penalty":1e7)") == "repetition_penalty");
  BOOST_TEST(field_of(R"("logit_bias":{"abc":1})") == "logit_bias");
  BOOST_TEST(field_of(R"("logit_bias":{"-3":1})") == "logit_bias");
  BOOST_TEST(field_of(R"("logit_bias":{"3":-101})") == "logit_bias.3");
  BOOST_TEST(field_of(R"("logit_bias":[3])") == "logit_bias");
  BOOST_TEST(field_of(R"("n":3,"best_of":2)") == "best_of");
  BOOST_TEST(field_of(R"("best_of":2,"stream":true)") == "best_of");
  BOOST_TEST(field_of(R"("skip_special_tokens":"no")") == "skip_special_tokens");
  BOOST_TEST(field_of(R"("ignore_eoss":true)") == "ignore_eoss");  // still unknown: still refused
  // best_of = n streams (nothing to choose), as vLLM allows.
  BOOST_TEST(*ok(Endpoint::completions, R"({"model":"m","prompt":"x","n":2,"best_of":2,"stream":true})").best_of == 2u);
}

BOOST_AUTO_TEST_CASE(model_may_be_omitted_when_the_server_names_its_model) {
  auto r = parse_request(Endpoint::completions, R"({"prompt":"x"})", "served");
  BOOST_TEST_REQUIRE(std::holds_alternative<CompletionRequest>(r));
  BOOST_TEST(std::get<CompletionRequest>(r).model == "served");
  auto given = parse_request(Endpoint::completions, R"({"model":"other","prompt":"x"})", "served");
  BOOST_TEST(std::get<CompletionRequest>(given).model == "other");  // the server decides whether it is served
  BOOST_TEST(bad(Endpoint::completions, R"({"prompt":"x"})").param == "model");  // no served name given
}
