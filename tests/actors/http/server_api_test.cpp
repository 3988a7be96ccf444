// End to end: the real `actorlm serve` process (cpu backend, default model) answering the
// OpenAI API over loopback: completions, chat, streaming framing, n, stop strings, seeds,
// logprobs, usage.
#define BOOST_TEST_MODULE server_api
#include "tests/actors/http/server_process.hpp"

#include <algorithm>

using namespace actorlm::testing;

namespace {

const std::string kModel = "SmolLM2-135M-Instruct";

ServerProcess& server() {
  static ServerProcess s;
  return s;
}

json completion(const json& body, const std::string& path = "/v1/completions") {
  auto c = server().client();
  auto r = post_json(c, path, body);
  BOOST_REQUIRE_MESSAGE(r, "no response");
  BOOST_REQUIRE_MESSAGE(r->status == 200, r->body);
  return json::parse(r->body);
}

}  // namespace

BOOST_AUTO_TEST_CASE(chat_answers_the_capital_of_france_and_stops_at_the_end_of_turn) {
  const json r = completion({{"model", kModel}, {"temperature", 0},
                             {"messages", {{{"role", "user"}, {"content", "What is the capital of France?"}}}}},
                            "/v1/chat/completions");
  BOOST_TEST(r["object"] == "chat.completion");
  BOOST_TEST(r["model"] == kModel);
  BOOST_TEST(r["choices"][0]["message"]["role"] == "assistant");
  BOOST_TEST(r["choices"][0]["message"]["content"] == "The capital of France is Paris.");
  BOOST_TEST(r["choices"][0]["finish_reason"] == "stop");
  BOOST_TEST(r["usage"]["prompt_tokens"] == 37);  // transformers' apply_chat_template length
  BOOST_TEST(r["usage"]["total_tokens"] == r["usage"]["prompt_tokens"].get<int>() + r["usage"]["completion_tokens"].get<int>());
}

BOOST_AUTO_TEST_CASE(completion_of_raw_text_stops_at_max_tokens_with_reason_length) {
  const json r = completion({{"model", kModel}, {"prompt", "The capital of France is"}, {"max_tokens", 3}, {"temperature", 0}});
  BOOST_TEST(r["object"] == "text_completion");
  BOOST_TEST(r["choices"][0]["text"] == " Paris.\n");
  BOOST_TEST(r["choices"][0]["finish_reason"] == "length");
  BOOST_TEST(r["usage"]["completion_tokens"] == 3);
}

BOOST_AUTO_TEST_CASE(stop_string_ends_the_text_before_it_across_token_boundaries) {
  // Greedy continuation is " Paris.\n\nThe"; ".\n" spans two tokens.
  const json r = completion({{"model", kModel}, {"prompt", "The capital of France is"}, {"max_tokens", 8},
                             {"temperature", 0}, {"stop", {"xyz", ".\n"}}});
  BOOST_TEST(r["choices"][0]["text"] == " Paris");
  BOOST_TEST(r["choices"][0]["finish_reason"] == "stop");
}

BOOST_AUTO_TEST_CASE(streaming_uses_openai_framing_with_usage_last_and_done) {
  auto c = server().client();
  const Stream s = post_stream(c, "/v1/completions",
                               {{"model", kModel}, {"prompt", "The capital of France is"}, {"max_tokens", 4},
                                {"temperature", 0}, {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  BOOST_TEST(s.status == 200);
  BOOST_REQUIRE(s.data.size() >= 3u);
  BOOST_TEST(s.data.back() == "[DONE]");
  const auto chunks = s.chunks();
  std::string text;
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) {
    BOOST_TEST(chunks[i]["object"] == "text_completion");
    BOOST_TEST(chunks[i]["usage"].is_null());
    text += chunks[i]["choices"][0]["text"].get<std::string>();
  }
  BOOST_TEST(text == " Paris.\n\n");
  BOOST_TEST(chunks[chunks.size() - 2]["choices"][0]["finish_reason"] == "length");
  BOOST_TEST(chunks.back()["choices"].empty());
  BOOST_TEST(chunks.back()["usage"]["completion_tokens"] == 4);
  // Every event is "data: <json>\n\n" or an SSE comment line.
  for (std::size_t at = 0; at < s.raw.size();) {
    const auto end = s.raw.find("\n\n", at);
    BOOST_REQUIRE(end != std::string::npos);
    const std::string event = s.raw.substr(at, end - at);
    BOOST_TEST((event.rfind("data: ", 0) == 0 || event.rfind(": ", 0) == 0), event);
    at = end + 2;
  }
}

BOOST_AUTO_TEST_CASE(chat_stream_opens_with_the_role_and_ends_with_finish_reason) {
  auto c = server().client();
  const Stream s = post_stream(c, "/v1/chat/completions",
                               {{"model", kModel}, {"temperature", 0}, {"stream", true},
                                {"messages", {{{"role", "user"}, {"content", "What is the capital of France?"}}}}});
  const auto chunks = s.chunks();
  BOOST_REQUIRE(chunks.size() >= 3u);
  BOOST_TEST(chunks.front()["object"] == "chat.completion.chunk");
  BOOST_TEST(chunks.front()["choices"][0]["delta"]["role"] == "assistant");
  std::string text;
  for (const auto& ch : chunks)
    if (ch["choices"][0]["delta"].contains("content")) text += ch["choices"][0]["delta"]["content"].get<std::string>();
  BOOST_TEST(text == "The capital of France is Paris.");
  BOOST_TEST(chunks.back()["choices"][0]["finish_reason"] == "stop");
  BOOST_TEST(s.data.back() == "[DONE]");
}

BOOST_AUTO_TEST_CASE(same_seed_reproduces_the_text_and_another_seed_changes_it) {
  auto ask = [](int seed) {
    return completion({{"model", kModel}, {"prompt", "Once upon a time"}, {"max_tokens", 12},
                       {"temperature", 1.0}, {"seed", seed}})["choices"][0]["text"].get<std::string>();
  };
  const std::string a = ask(11), b = ask(11), c = ask(12);
  BOOST_TEST(a == b);
  BOOST_TEST(a != c);
}

BOOST_AUTO_TEST_CASE(n_two_gives_two_indexed_choices_that_differ_when_sampled) {
  const json r = completion({{"model", kModel}, {"prompt", "My favourite colour is"}, {"max_tokens", 10},
                             {"temperature", 1.0}, {"seed", 5}, {"n", 2}});
  BOOST_REQUIRE(r["choices"].size() == 2u);
  BOOST_TEST(r["choices"][0]["index"] == 0);
  BOOST_TEST(r["choices"][1]["index"] == 1);
  BOOST_TEST(r["choices"][0]["text"] != r["choices"][1]["text"]);
  BOOST_TEST(r["usage"]["completion_tokens"] == 20);
}

BOOST_AUTO_TEST_CASE(several_prompts_give_choices_in_prompt_order) {
  const json r = completion({{"model", kModel}, {"prompt", {"The capital of France is", "One, two,"}},
                             {"max_tokens", 2}, {"temperature", 0}});
  BOOST_REQUIRE(r["choices"].size() == 2u);
  BOOST_TEST(r["choices"][0]["text"] == " Paris.");
  BOOST_TEST(r["choices"][1]["index"] == 1);
}

BOOST_AUTO_TEST_CASE(completion_logprobs_list_each_token_with_its_top_alternatives) {
  const json r = completion({{"model", kModel}, {"prompt", "The capital of France is"}, {"max_tokens", 3},
                             {"temperature", 0}, {"logprobs", 2}});
  const json& lp = r["choices"][0]["logprobs"];
  BOOST_REQUIRE(lp["tokens"].size() == 3u);
  BOOST_TEST(lp["tokens"][0] == " Paris");
  for (std::size_t i = 0; i < 3; ++i) {
    BOOST_TEST(lp["token_logprobs"][i].get<double>() <= 0.0);
    BOOST_TEST(lp["top_logprobs"][i].size() == 2u);
    // Greedy: the chosen token is the most likely one, so it is among the top two.
    BOOST_TEST(lp["top_logprobs"][i].contains(lp["tokens"][i].get<std::string>()));
  }
}

BOOST_AUTO_TEST_CASE(chat_logprobs_carry_bytes_and_top_logprobs) {
  const json r = completion({{"model", kModel}, {"temperature", 0}, {"max_tokens", 2}, {"logprobs", true},
                             {"top_logprobs", 3}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}},
                            "/v1/chat/completions");
  const json& content = r["choices"][0]["logprobs"]["content"];
  BOOST_REQUIRE(content.size() == 2u);
  BOOST_TEST(content[0]["top_logprobs"].size() == 3u);
  const std::string tok = content[0]["token"];
  BOOST_TEST(content[0]["bytes"].size() == tok.size());
}

BOOST_AUTO_TEST_CASE(token_id_prompts_are_accepted) {
  const json r = completion({{"model", kModel}, {"prompt", {504, 3575, 282, 4649, 314}}, {"max_tokens", 1}, {"temperature", 0}});
  BOOST_TEST(r["usage"]["prompt_tokens"] == 5);
  BOOST_TEST(r["choices"][0]["text"].get<std::string>().size() > 0u);
}

BOOST_AUTO_TEST_CASE(models_health_ready_and_metrics_answer) {
  auto c = server().client();
  auto models = c.Get("/v1/models");
  BOOST_REQUIRE(models);
  BOOST_TEST(json::parse(models->body)["data"][0]["id"] == kModel);
  BOOST_TEST(status_of(c.Get("/health")) == 200);
  BOOST_TEST(status_of(c.Get("/ready")) == 200);
  auto m = c.Get("/metrics");
  BOOST_REQUIRE(m);
  BOOST_TEST(metric(m->body, "actorlm_ready") == 1);
  BOOST_TEST(metric(m->body, "actorlm_kv_cache_total_blocks") > 0);
  BOOST_TEST(m->body.find("# TYPE actorlm_time_to_first_token_seconds histogram") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(presence_penalty_keeps_greedy_from_repeating_itself) {
  // Greedy SmolLM2 loops back to "The capital of France is" when continuing this prompt; with
  // a strong presence penalty (OpenAI's definition, applied on the shard) it moves on.
  auto text = [](double presence) {
    return completion({{"model", kModel}, {"prompt", "The capital of France is Paris. The capital of France is"},
                       {"max_tokens", 24}, {"temperature", 0}, {"presence_penalty", presence}})["choices"][0]["text"]
        .get<std::string>();
  };
  const std::string plain = text(0), penalised = text(2);
  BOOST_TEST(plain.find("The capital of France is") != std::string::npos, plain);
  BOOST_TEST(penalised.find("The capital of France is") == std::string::npos, penalised);
  BOOST_TEST(text(2) == penalised, "penalties are deterministic");
}

BOOST_AUTO_TEST_CASE(a_clients_x_request_id_names_the_response_and_comes_back_with_it) {
  auto c = server().client();
  c.set_default_headers({{"X-Request-Id", "trace-7f3a"}});
  auto r = post_json(c, "/v1/completions", {{"model", kModel}, {"prompt", "Hi"}, {"max_tokens", 1}});
  BOOST_REQUIRE(r);
  BOOST_TEST(r->status == 200);
  BOOST_TEST(r->get_header_value("X-Request-Id") == "trace-7f3a");
  BOOST_TEST(json::parse(r->body)["id"] == "cmpl-trace-7f3a");  // vLLM's naming
  const Stream s = post_stream(c, "/v1/chat/completions",
                               {{"model", kModel}, {"max_tokens", 2}, {"stream", true},
                                {"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  BOOST_TEST(s.status == 200);
  BOOST_TEST(s.request_id == "trace-7f3a");
  for (const auto& chunk : s.chunks()) BOOST_TEST(chunk["id"] == "chatcmpl-trace-7f3a");
  // An error answer carries it too.
  auto bad = post_json(c, "/v1/completions", {{"model", kModel}, {"prompt", "Hi"}, {"max_tokens", 0}});
  BOOST_REQUIRE(bad);
  BOOST_TEST(bad->status == 400);
  BOOST_TEST(bad->get_header_value("X-Request-Id") == "trace-7f3a");
  // Without one, the header is the engine's request id, as before.
  auto plain = server().client();
  auto p = post_json(plain, "/v1/completions", {{"model", kModel}, {"prompt", "Hi"}, {"max_tokens", 1}});
  BOOST_REQUIRE(p);
  const std::string engine_id = p->get_header_value("X-Request-Id");
  BOOST_TEST(!engine_id.empty());
  BOOST_TEST(std::all_of(engine_id.begin(), engine_id.end(), [](char ch) { return ch >= '0' && ch <= '9'; }));
}

BOOST_AUTO_TEST_CASE(an_x_request_id_that_would_break_a_log_line_is_refused_naming_the_header) {
  for (const std::string id : {std::string(257, 'a'), std::string("two words"), std::string("tab\there")}) {
    auto c = server().client();
    c.set_default_headers({{"X-Request-Id", id}});
    auto r = post_json(c, "/v1/completions", {{"model", kModel}, {"prompt", "Hi"}, {"max_tokens", 1}});
    BOOST_REQUIRE(r);
    BOOST_TEST(r->status == 400);
    BOOST_TEST(r->body.find("X-Request-Id header") != std::string::npos, r->body);
  }
}

BOOST_AUTO_TEST_CASE(a_repeated_prompt_reports_the_prompt_tokens_the_prefix_cache_served) {
  // A prompt no other case sends, several 16-token blocks long.
  std::string prompt = "A prefix cache check:";
  for (int i = 0; i < 12; ++i) prompt += " the quick brown fox number " + std::to_string(i);
  const json body{{"model", kModel}, {"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  const json first = completion(body);
  const json second = completion(body);
  const int prompt_tokens = first["usage"]["prompt_tokens"];
  BOOST_TEST(prompt_tokens > 64);
  BOOST_TEST(first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
  // Every full block but the one holding the last prompt token, whose logits are needed.
  BOOST_TEST(second["usage"]["prompt_tokens_details"]["cached_tokens"] == (prompt_tokens - 1) / 16 * 16);
  // Streamed: the final usage chunk carries it.
  auto c = server().client();
  json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  const auto chunks = post_stream(c, "/v1/completions", streamed).chunks();
  BOOST_REQUIRE(!chunks.empty());
  BOOST_TEST(chunks.back()["usage"]["prompt_tokens_details"]["cached_tokens"] == (prompt_tokens - 1) / 16 * 16);
}

BOOST_AUTO_TEST_CASE(tokenize_counts_a_prompt_as_the_completion_endpoints_do_and_detokenize_inverts_it) {
  auto c = server().client();
  auto rc = post_json(c, "/tokenize", {{"messages", {{{"role", "user"}, {"content", "What is the capital of France?"}}}}});
  BOOST_REQUIRE(rc);
  const json chat = json::parse(rc->body);
  BOOST_TEST(chat["count"] == 37);  // the chat answer's usage.prompt_tokens (transformers' template length)
  BOOST_TEST(chat["tokens"].size() == 37u);
  BOOST_TEST(chat["token_strs"].is_null());
  BOOST_TEST(chat["max_model_len"] > 0);
  const std::string text = "The capital of France is";
  auto r = post_json(c, "/tokenize", {{"model", nullptr}, {"prompt", text}, {"return_token_strs", true}});  // null: absent
  BOOST_REQUIRE(r);
  BOOST_TEST(r->status == 200);
  const json raw = json::parse(r->body);
  const json answered = completion({{"model", kModel}, {"prompt", text}, {"max_tokens", 1}});
  BOOST_TEST(raw["count"] == answered["usage"]["prompt_tokens"]);
  // The vocabulary's pieces, as HF's convert_ids_to_tokens spells them (vLLM's token_strs).
  const std::vector<std::string> pieces = {"The", "\u0120capital", "\u0120of", "\u0120France", "\u0120is"};
  BOOST_TEST(raw["token_strs"].get<std::vector<std::string>>() == pieces, raw["token_strs"].dump());
  auto d = post_json(c, "/detokenize", {{"tokens", raw["tokens"]}});
  BOOST_REQUIRE(d);
  BOOST_TEST(d->status == 200);
  BOOST_TEST(json::parse(d->body)["prompt"] == text);
  // Special tokens are written out, as HF's decode writes them.
  auto s = post_json(c, "/detokenize", {{"tokens", {chat["tokens"][0]}}});
  BOOST_REQUIRE(s);
  BOOST_TEST(json::parse(s->body)["prompt"] == "<|im_start|>");
  // A float with an integral value is an id, as on /v1.
  auto f = post_json(c, "/detokenize", {{"tokens", {double(raw["tokens"][0].get<int>())}}});
  BOOST_REQUIRE(f);
  BOOST_TEST(json::parse(f->body)["prompt"] == "The");
}

BOOST_AUTO_TEST_CASE(tokenize_and_detokenize_refuse_what_they_do_not_take_naming_it) {
  struct Case {
    const char* path;
    json body;
    int status;
    const char* param;
  };
  const std::vector<Case> cases = {
      {"/tokenize", {{"prompt", "x"}, {"max_tokens", 3}}, 400, "max_tokens"},
      {"/tokenize", {{"prompt", "x"}, {"messages", json::array()}}, 400, "prompt"},
      {"/tokenize", {{"prompt", {"a", "b"}}}, 400, "prompt"},
      {"/tokenize", json::object(), 400, "prompt"},
      {"/tokenize", {{"prompt", "x"}, {"return_token_strs", 1}}, 400, "return_token_strs"},
      {"/tokenize", {{"model", "gpt-4"}, {"prompt", "x"}}, 404, "model"},
      {"/detokenize", {{"tokens", {1, 99999999}}}, 400, "tokens"},
      {"/detokenize", {{"tokens", "1"}}, 400, "tokens"},
      {"/detokenize", {{"tokens", {1}}, {"skip", true}}, 400, "skip"},
      {"/detokenize", {{"tokens", {1.5}}}, 400, "tokens"},
  };
  auto c = server().client();
  for (const auto& k : cases) {
    auto r = post_json(c, k.path, k.body);
    BOOST_REQUIRE(r);
    BOOST_TEST(r->status == k.status, k.path << " " << k.body.dump() << ": " << r->body);
    BOOST_TEST(json::parse(r->body)["error"]["param"] == k.param, k.path << " " << k.body.dump() << ": " << r->body);
  }
  // What a bad id is quoted with stays short, whatever the client sent.
  auto r = post_json(c, "/detokenize", {{"tokens", {std::string(100000, 'x')}}});
  BOOST_REQUIRE(r);
  BOOST_TEST(r->status == 400);
  BOOST_TEST(r->body.size() < 400u, r->body.size());
}
