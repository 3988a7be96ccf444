// From a parsed API request to the engine's requests: prompts with the template and special-token
// switches, token ids checked against the vocabulary, max_tokens and min_tokens, and the
// sampling, stop and EOS settings each engine request carries (the sim's synthetic codec).
#define BOOST_TEST_MODULE request_spec
#include <boost/test/unit_test.hpp>

#include "actors/http/request_spec.hpp"
#include "tests/actors/http/parse_helpers.hpp"

using namespace actorlm;
using namespace actorlm::http;

namespace {

// What ServedModel::request gives: the model's end tokens (here 0 and 1) as stop tokens.
scheduler::RequestSpec base() {
  scheduler::RequestSpec s;
  s.id = 9;
  s.prompt = {5, 6};
  s.max_tokens = 8;
  s.stop_token_ids = {0, 1};
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(carries_the_sampling_extensions_to_the_engine_request) {
  const auto r = testing::parse_ok(Endpoint::completions,
                        R"({"model":"m","prompt":"x","n":2,"best_of":4,"repetition_penalty":1.5,"logit_bias":{"7":-100},)"
                        R"("min_tokens":3,"stop_token_ids":[1,4],"temperature":0.5})");
  const auto s = request_spec(r, base(), 42);
  BOOST_TEST(s.n == 4u);  // best_of samples run
  BOOST_TEST(s.min_tokens == 3u);
  BOOST_TEST(!s.ignore_eos);
  BOOST_TEST((s.stop_token_ids == std::vector<kv::TokenId>{0, 1, 4}));  // the model's, then the request's
  BOOST_TEST(s.sampling.seed == 42u);
  BOOST_TEST(s.sampling.temperature == 0.5f);
  BOOST_TEST(s.sampling.repetition_penalty == 1.5f);
  BOOST_TEST_REQUIRE(s.sampling.logit_bias.size() == 1u);
  BOOST_TEST(s.sampling.logit_bias[0].token == 7);
  BOOST_TEST(s.sampling.logit_bias[0].bias == -100.0f);
}

BOOST_AUTO_TEST_CASE(echo_with_logprobs_asks_the_shards_for_the_prompts_logprobs_with_as_many_alternatives) {
  const auto echo = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","echo":true,"logprobs":2})");
  BOOST_TEST(request_spec(echo, base(), 0).sampling.prompt_logprobs == 2);
  const auto plain = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","logprobs":2})");
  BOOST_TEST(request_spec(plain, base(), 0).sampling.prompt_logprobs == -1);
  const auto text = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","echo":true})");
  BOOST_TEST(request_spec(text, base(), 0).sampling.prompt_logprobs == -1);
  // vLLM's prompt_logprobs asks too; with echo's, the shards compute the larger k.
  const auto vllm = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","prompt_logprobs":0})");
  BOOST_TEST(request_spec(vllm, base(), 0).sampling.prompt_logprobs == 0);
  const auto both = testing::parse_ok(Endpoint::completions,
                                      R"({"model":"m","prompt":"x","echo":true,"logprobs":1,"prompt_logprobs":4})");
  BOOST_TEST(request_spec(both, base(), 0).sampling.prompt_logprobs == 4);
  const auto fewer = testing::parse_ok(Endpoint::completions,
                                       R"({"model":"m","prompt":"x","echo":true,"logprobs":3,"prompt_logprobs":1})");
  BOOST_TEST(request_spec(fewer, base(), 0).sampling.prompt_logprobs == 3);
}

BOOST_AUTO_TEST_CASE(ignore_eos_drops_the_model_stop_tokens_but_keeps_them_masked_before_min_tokens) {
  const auto r = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","ignore_eos":true,"stop_token_ids":[4]})");
  const auto s = request_spec(r, base(), 0);
  BOOST_TEST(s.ignore_eos);
  BOOST_TEST((s.stop_token_ids == std::vector<kv::TokenId>{4}));  // the request's own still stop
  BOOST_TEST(s.sampling.min_tokens_stop_ids.empty());
  const auto m = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","ignore_eos":true,"min_tokens":2})");
  BOOST_TEST((request_spec(m, base(), 0).sampling.min_tokens_stop_ids == std::vector<kv::TokenId>{0, 1}));
}

BOOST_AUTO_TEST_CASE(prompts_follow_add_special_tokens_and_echo_keeps_their_text) {
  const auto codec = serving::make_synthetic_codec(1000);
  const auto r = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":["a b","c"],"echo":true})");
  auto in = prompt_inputs(r, *codec, 1000, 64);
  BOOST_TEST_REQUIRE(std::holds_alternative<std::vector<PromptInput>>(in));
  const auto& prompts = std::get<std::vector<PromptInput>>(in);
  BOOST_TEST_REQUIRE(prompts.size() == 2u);
  BOOST_TEST(prompts[0].echo == "a b");
  BOOST_TEST(prompts[0].tokens == codec->raw_prompt("a b"));
  const auto ids = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":[3,4],"echo":true})");
  const auto decoded = std::get<std::vector<PromptInput>>(prompt_inputs(ids, *codec, 1000, 64));
  BOOST_TEST(decoded[0].echo == codec->token_text(3) + codec->token_text(4));
  const auto far = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":[3,1000]})");
  BOOST_TEST(std::get<ApiError>(prompt_inputs(far, *codec, 1000, 64)).param == "prompt");
  const auto chat = testing::parse_ok(Endpoint::chat, R"({"model":"m","messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false})");
  const auto rendered = std::get<std::vector<PromptInput>>(prompt_inputs(chat, *codec, 1000, 64));
  BOOST_TEST(rendered[0].tokens == codec->chat_prompt(chat.messages, {false, false}, false));
}

BOOST_AUTO_TEST_CASE(truncate_prompt_tokens_keeps_the_last_tokens_of_each_prompt_and_echoes_them) {
  const auto codec = serving::make_synthetic_codec(1000);
  const auto kept = [&](const std::string& body, std::uint32_t max_model_len = 64) {
    const auto r = testing::parse_ok(Endpoint::completions, body);
    return std::get<std::vector<PromptInput>>(prompt_inputs(r, *codec, 1000, max_model_len));
  };
  const auto two = kept(R"({"model":"m","prompt":[[3,4,5,6],[7]],"truncate_prompt_tokens":2,"echo":true})");
  BOOST_TEST((two[0].tokens == std::vector<model::Token>{5, 6}));  // left truncation, as vLLM's
  BOOST_TEST(two[0].echo == codec->token_text(5) + codec->token_text(6));  // what the model reads
  BOOST_TEST((two[1].tokens == std::vector<model::Token>{7}));           // shorter: unchanged
  const auto text = kept(R"({"model":"m","prompt":"a b c d","truncate_prompt_tokens":3,"echo":true})");
  const auto whole = codec->raw_prompt("a b c d");
  BOOST_TEST_REQUIRE(whole.size() > 3u);
  BOOST_TEST((text[0].tokens == std::vector<model::Token>(whole.end() - 3, whole.end())));
  // -1: the context length.
  BOOST_TEST(kept(R"({"model":"m","prompt":[1,2,3,4,5],"truncate_prompt_tokens":-1})", 3)[0].tokens.size() == 3u);
  const auto chat = testing::parse_ok(Endpoint::chat, R"({"model":"m","messages":[{"role":"user","content":"hi there"}],"truncate_prompt_tokens":2})");
  BOOST_TEST(std::get<std::vector<PromptInput>>(prompt_inputs(chat, *codec, 1000, 64))[0].tokens.size() == 2u);
  // More than the context, zero, below -1 or not an integer: a 400 naming the field.
  const auto over = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","truncate_prompt_tokens":65})");
  const auto e = std::get<ApiError>(prompt_inputs(over, *codec, 1000, 64));
  BOOST_TEST(e.param == "truncate_prompt_tokens");
  BOOST_TEST(e.message == "truncate_prompt_tokens: 65 is more than the context length (64)");
  for (const char* bad : {"0", "-2", "1.5", "\"3\""})
    BOOST_TEST(testing::parse_bad(Endpoint::completions, std::string(R"({"model":"m","prompt":"x","truncate_prompt_tokens":)") + bad + "}").param ==
               "truncate_prompt_tokens");
}

BOOST_AUTO_TEST_CASE(token_ids_outside_the_vocabulary_are_named) {
  const auto stop = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","stop_token_ids":[3,50]})");
  const auto e = check_token_ids(stop, 50);
  BOOST_TEST_REQUIRE(e.has_value());
  BOOST_TEST(e->param == "stop_token_ids");
  BOOST_TEST(e->message == "stop_token_ids[1]: token id 50 is outside the vocabulary [0, 50)");
  const auto bias = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","logit_bias":{"77":1}})");
  BOOST_TEST(check_token_ids(bias, 50)->param == "logit_bias");
  BOOST_TEST(!check_token_ids(bias, 78));
}

BOOST_AUTO_TEST_CASE(min_tokens_may_not_exceed_the_max_tokens_a_prompt_gets) {
  const auto chat = testing::parse_ok(Endpoint::chat, R"({"model":"m","messages":[{"role":"user","content":"x"}],"min_tokens":100})");
  BOOST_TEST(std::get<std::uint32_t>(max_tokens_for(chat, 20, 128, "messages")) == 108u);  // the rest of the context
  const auto e = std::get<ApiError>(max_tokens_for(chat, 40, 128, "messages"));
  BOOST_TEST(e.param == "min_tokens");
  BOOST_TEST(e.message == "min_tokens: must be at most max_tokens (88), found 100");
  const auto completion = testing::parse_ok(Endpoint::completions, R"({"model":"m","prompt":"x","min_tokens":17})");
  BOOST_TEST(std::get<ApiError>(max_tokens_for(completion, 2, 128, "prompt")).param == "min_tokens");  // default 16
}
