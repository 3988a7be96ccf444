// StreamChunks (the streamed chunks written member by member) against chunk_json (the same chunk
// as a nlohmann JSON tree): byte for byte over random deltas, ids, models and flags.
#define BOOST_TEST_MODULE openai_response
#include <boost/test/unit_test.hpp>

#include "actors/http/openai_response.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <random>
#include <string>

using namespace actorlm::http;

namespace {

// Text mixing what takes the plain path and what must be escaped: quotes, backslashes, control
// bytes, DEL, valid UTF-8, and invalid bytes (a lone continuation, a cut sequence, 0xff).
std::string random_text(std::mt19937_64& rng) {
  static const std::vector<std::string> pieces = {
      "a", "Z", " ", "hello", "0", "~", "\"", "\\", "\n", "\t", "\r", std::string(1, '\0'), "\x01", "\x1f",
      "\x7f", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\x80", "\xe2\x82", "\xff", "/", "<", "{}"};
  std::string s;
  const auto n = rng() % 6;
  for (std::size_t i = 0; i < n; ++i) s += pieces[rng() % pieces.size()];
  return s;
}

ChoiceDelta random_delta(std::mt19937_64& rng) {
  ChoiceDelta d;
  d.index = static_cast<std::uint32_t>(rng() % 3 == 0 ? rng() : rng() % 4);
  d.text = random_text(rng);
  switch (rng() % 4) {
    case 0: d.finish_reason = "stop"; break;
    case 1: d.finish_reason = "length"; break;
    default: break;
  }
  if (rng() % 3 == 0) d.usage = Usage{rng() % 5000, rng() % 3 == 0 ? rng() : rng() % 100, std::nullopt};
  if (d.usage && rng() % 2 == 0) d.usage->cached_tokens = rng() % 5000;
  for (auto k = rng() % 3; k > 0; --k) {
    TokenLogprob lp{random_text(rng), -static_cast<float>(rng() % 1000) / 97.0f, {}};
    for (auto t = rng() % 3; t > 0; --t) lp.top.emplace_back(random_text(rng), -static_cast<float>(rng() % 50));
    d.logprobs.push_back(std::move(lp));
  }
  return d;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_streamed_chunk_is_byte_for_byte_the_json_trees_dump) {
  std::mt19937_64 rng(7);
  int plain = 0, escaped = 0;
  for (int i = 0; i < 20000; ++i) {
    ResponseMeta meta;
    meta.endpoint = rng() % 2 ? Endpoint::chat : Endpoint::completions;
    meta.id = (meta.endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(rng() % 100000);
    if (rng() % 4 == 0) meta.id += random_text(rng);
    meta.created = static_cast<std::int64_t>(rng() % 4000000000u) - (rng() % 10 == 0 ? 5000000000 : 0);
    meta.model = rng() % 2 ? "SmolLM2-135M-Instruct" : random_text(rng);
    const bool include_usage = rng() % 2, logprobs = rng() % 3 == 0, role_chunk = rng() % 4 == 0;
    const ChoiceDelta d = random_delta(rng);

    const std::string want = "data: " + chunk_json(meta, d, logprobs, include_usage, role_chunk) + "\n\n";
    std::string got = "kept";  // what the buffer held before stays
    StreamChunks(meta, include_usage).append_event(got, d, logprobs, role_chunk);
    BOOST_TEST_REQUIRE(got == "kept" + want, "case " << i);
    // The fast path copies printable ASCII other than quotes and backslashes; anything else goes to nlohmann.
    const bool fast = std::all_of(d.text.begin(), d.text.end(), [](unsigned char c) {
      return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
    });
    (fast ? plain : escaped)++;
  }
  BOOST_TEST(plain > 1000);  // both kinds of text were covered
  BOOST_TEST(escaped > 1000);
}

BOOST_AUTO_TEST_CASE(a_completion_chunk_reads_back_as_openai_shapes_it) {
  ResponseMeta meta{Endpoint::completions, "cmpl-42", 1733000000, "m", ""};
  ChoiceDelta d;
  d.index = 1;
  d.text = "say \"hi\"\n";
  d.finish_reason = "length";
  d.usage = Usage{9, 4, std::nullopt};
  std::string out;
  StreamChunks(meta, true).append_event(out, d, false);
  BOOST_TEST_REQUIRE(out.rfind("data: ", 0) == 0u);
  BOOST_TEST_REQUIRE(out.size() > 8u);
  BOOST_TEST(out.substr(out.size() - 2) == "\n\n");
  const auto j = nlohmann::json::parse(out.substr(6));
  BOOST_TEST(j["object"] == "text_completion");
  BOOST_TEST(j["id"] == "cmpl-42");
  BOOST_TEST(j["created"] == 1733000000);
  BOOST_TEST(j["choices"][0]["index"] == 1);
  BOOST_TEST(j["choices"][0]["text"] == "say \"hi\"\n");
  BOOST_TEST(j["choices"][0]["finish_reason"] == "length");
  BOOST_TEST(j["choices"][0]["logprobs"].is_null());
  BOOST_TEST(j["usage"]["total_tokens"] == 13);
}

// vLLM's shape: null for the first prompt token, then {"id": {"logprob", "rank", "decoded_token"}}
// for the token and its alternatives (ranks 1..k); per choice for completions, once for chat.
BOOST_AUTO_TEST_CASE(prompt_logprobs_take_vllms_shape) {
  const std::vector<PromptTokenScore> scores{{7, " b", -2.5f, 3, {{4, " a", -0.5f}, {9, "\xff", -1.5f}}},
                                             {4, " a", -0.25f, 1, {{4, " a", -0.25f}}},
                                             {5, "c", -std::numeric_limits<float>::infinity(), 9, {}}};
  ChoiceResult with{"x", {}, "length"};
  with.prompt_logprobs = &scores;
  const std::vector<ChoiceResult> two{with, with};
  const auto body = nlohmann::json::parse(completion_json({Endpoint::completions, "cmpl-1", 1, "m", ""}, two, false, Usage{3, 1, 0}));
  BOOST_TEST_REQUIRE(body["choices"].size() == 2u);
  for (const auto& c : body["choices"]) {
    const auto& p = c["prompt_logprobs"];
    BOOST_TEST_REQUIRE(p.size() == 4u);
    BOOST_TEST(p[0].is_null());
    BOOST_TEST(p[1].size() == 3u);  // the token and its two alternatives
    BOOST_TEST(p[1]["7"]["logprob"] == -2.5);
    BOOST_TEST(p[1]["7"]["rank"] == 3);
    BOOST_TEST(p[1]["7"]["decoded_token"] == " b");
    BOOST_TEST(p[1]["4"]["rank"] == 1);
    BOOST_TEST(p[1]["9"]["rank"] == 2);
    BOOST_TEST(p[1]["9"]["decoded_token"] == "\xef\xbf\xbd");  // an invalid byte as U+FFFD
    BOOST_TEST(p[2].size() == 1u);  // the token is its own first alternative: once
    BOOST_TEST(p[2]["4"]["rank"] == 1);
    BOOST_TEST(p[3]["5"]["logprob"] == -9999.0);  // -inf, clamped as vLLM does
  }
  BOOST_TEST(!body.contains("prompt_logprobs"));
  const auto chat = nlohmann::json::parse(completion_json({Endpoint::chat, "chatcmpl-1", 1, "m", ""}, two, false, Usage{3, 1, 0}));
  BOOST_TEST(chat["prompt_logprobs"].size() == 4u);
  BOOST_TEST(!chat["choices"][0].contains("prompt_logprobs"));
  // Not asked: nothing added.
  const auto plain = nlohmann::json::parse(completion_json({Endpoint::completions, "cmpl-2", 1, "m", ""},
                                                           {ChoiceResult{"x", {}, "stop"}}, false, Usage{3, 1, 0}));
  BOOST_TEST(!plain["choices"][0].contains("prompt_logprobs"));
}

BOOST_AUTO_TEST_CASE(a_final_usage_names_the_prompt_tokens_the_prefix_cache_served_as_openai_does) {
  const ResponseMeta meta{Endpoint::chat, "chatcmpl-7", 1733000000, "m", ""};
  const std::vector<ChoiceResult> choices{{"hi", {}, "stop"}};
  const auto body = nlohmann::json::parse(completion_json(meta, choices, false, Usage{40, 2, 32}));
  BOOST_TEST(body["usage"]["prompt_tokens_details"]["cached_tokens"] == 32);
  BOOST_TEST(body["usage"]["prompt_tokens"] == 40);
  const auto chunk = nlohmann::json::parse(usage_chunk_json(meta, Usage{40, 2, 0}));
  BOOST_TEST(chunk["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
  // Without a count (a chunk's running usage) the member is left out rather than made up.
  const auto plain = nlohmann::json::parse(usage_chunk_json(meta, Usage{40, 2, std::nullopt}));
  BOOST_TEST(!plain["usage"].contains("prompt_tokens_details"));
}
