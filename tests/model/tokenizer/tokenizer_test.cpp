// Tokenizer::encode / decode against HF `tokenizers` on the default model's vocabulary
// (fixtures/tokenizer_goldens.json), plus properties on random input and special tokens.
#define BOOST_TEST_MODULE model_tokenizer_tokenizer
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <random>

#include "model/tokenizer/byte_level.hpp"
#include "tests/model/tokenizer/tokenizer_fixtures.hpp"

namespace data = boost::unit_test::data;
using namespace actorlm::model;
using namespace actorlm::model::test;

BOOST_AUTO_TEST_CASE(the_hf_goldens_and_the_default_model_load) {
  BOOST_TEST_REQUIRE(goldens().error == "");
  BOOST_TEST(goldens().cases.size() > 50u);
  BOOST_TEST(smollm2().size() == 49152u);
  BOOST_TEST(smollm2().vocabulary().pre == "smollm");
}

BOOST_DATA_TEST_CASE(encodes_each_text_as_hf_tokenizers_does_for_each_pre_tokenizer,
                     data::make(kPreTypes) * data::make(case_indices()), pre, index) {
  const GoldenCase& c = goldens().cases[index];
  BOOST_TEST_CONTEXT("pre " << pre << ", text " << printable(c.text)) {
    const std::vector<Token> ids = tokenizer_for(pre).encode(c.text, true);
    BOOST_TEST(ids == c.ids_by_pre.at(pre), boost::test_tools::per_element());
  }
}

BOOST_DATA_TEST_CASE(encodes_special_tokens_as_text_when_not_parsing_them,
                     data::make(case_indices()), index) {
  const GoldenCase& c = goldens().cases[index];
  BOOST_TEST_CONTEXT("text " << printable(c.text)) {
    BOOST_TEST(smollm2().encode(c.text, true) == c.ids, boost::test_tools::per_element());
    BOOST_TEST(smollm2().encode(c.text, false) == c.ids_plain, boost::test_tools::per_element());
  }
}

// The golden bytes are HF's ids unspelled by Python: the text, less any byte SmolLM2 has no
// token for.
BOOST_DATA_TEST_CASE(decoding_the_encoding_gives_the_text_back,
                     data::make(kPreTypes) * data::make({true, false}) * data::make(case_indices()),
                     pre, parse_special, index) {
  const GoldenCase& c = goldens().cases[index];
  const Tokenizer& t = tokenizer_for(pre);
  BOOST_TEST(printable(t.decode(c.ids)) == printable(c.decoded));
  BOOST_TEST(printable(t.decode(t.encode(c.text, parse_special))) == printable(c.decoded));
}

namespace {

// `s` less the bytes `t` has no token for (0x04, 0xFF, ... in SmolLM2), which encode drops.
std::string without_untokenizable_bytes(const Tokenizer& t, std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (!t.encode(std::string(1, c), false).empty()) out += c;
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(bytes_without_a_token_are_dropped_as_hf_drops_them) {
  BOOST_TEST(smollm2().encode("\xFF", true).empty());
  BOOST_TEST(smollm2().encode("\x04", false).empty());
  BOOST_TEST(smollm2().encode("a\xFF", true) == smollm2().encode("a", true));
  BOOST_TEST(without_untokenizable_bytes(smollm2(),
                                         "a\x04\xF1\xFF"
                                         "b") == "ab");
}

BOOST_AUTO_TEST_CASE(special_tokens_are_one_id_only_when_parsed) {
  const Tokenizer& t = smollm2();
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const auto parsed = t.encode(text, true);
  BOOST_TEST_REQUIRE(parsed.size() >= 3u);
  BOOST_TEST(parsed.front() == 1);  // <|im_start|>
  BOOST_TEST(parsed.back() == 2);   // <|im_end|>
  BOOST_TEST(t.is_control(1));
  BOOST_TEST(t.is_special(2));
  BOOST_TEST(!t.is_special(parsed[1]));
  const auto plain = t.encode(text, false);
  BOOST_TEST(std::count(plain.begin(), plain.end(), 1) == 0);
  BOOST_TEST(std::count(plain.begin(), plain.end(), 2) == 0);
  BOOST_TEST(t.token_bytes(1) == "<|im_start|>");
  BOOST_TEST(t.decode(plain) == text);
}

BOOST_AUTO_TEST_CASE(user_defined_tokens_are_matched_whole_even_when_not_parsing_specials) {
  Vocabulary v = smollm2_vocabulary();
  v.token_types[3] = 4;  // <repo_name>: user-defined, like <think> in some models
  const Tokenizer t(std::move(v));
  for (const bool parse_special : {true, false}) {
    const auto ids = t.encode("a<repo_name>b<|im_end|>", parse_special);
    BOOST_TEST(std::count(ids.begin(), ids.end(), 3) == 1);
    BOOST_TEST(std::count(ids.begin(), ids.end(), 2) == (parse_special ? 1 : 0));
  }
  BOOST_TEST(t.is_special(3));
  BOOST_TEST(!t.is_control(3));
}

BOOST_AUTO_TEST_CASE(the_longest_special_token_wins_at_the_leftmost_position) {
  // A tiny vocabulary: the 256 byte spellings, then "<a>" and "<a><b>" as control tokens.
  Vocabulary v;
  v.tokens.assign(byte_level::spellings().begin(), byte_level::spellings().end());
  v.tokens.push_back("<a>");
  v.tokens.push_back("<a><b>");
  v.token_types.assign(v.tokens.size(), 1);
  v.token_types[256] = v.token_types[257] = 3;
  const Tokenizer t(std::move(v));
  const auto ids = t.encode("x<a><b><a>", true);
  BOOST_TEST_REQUIRE(ids.size() == 3u);
  BOOST_TEST(ids[1] == 257);
  BOOST_TEST(ids[2] == 256);
}

// Any bytes, valid UTF-8 or not, come back unchanged, but for those without a token.
BOOST_DATA_TEST_CASE(random_bytes_round_trip, data::make(kPreTypes) * data::make(indices(4)), pre,
                     seed) {
  std::mt19937 rng(static_cast<unsigned>(seed) * 7919u + 1);
  const Tokenizer& t = tokenizer_for(pre);
  for (int round = 0; round < 200; ++round) {
    std::string s(std::uniform_int_distribution<int>(0, 40)(rng), '\0');
    for (char& c : s) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    for (const bool parse_special : {true, false}) {
      BOOST_TEST(printable(t.decode(t.encode(s, parse_special))) ==
                 printable(without_untokenizable_bytes(t, s)));
    }
  }
}

// Random mixtures of awkward pieces (digits, spaces, specials, multi-byte characters) round
// trip, and with special tokens parsed every special in the text is its own id.
BOOST_DATA_TEST_CASE(random_mixtures_round_trip, data::make(kPreTypes) * data::make(indices(4)),
                     pre, seed) {
  const std::vector<std::string> parts = {" ",          "  ",
                                          "\n",         "\t",
                                          "\r\n",       "a",
                                          "Z",          "'s",
                                          "'LL",        "1",
                                          "23",         "456",
                                          "½",          "²",
                                          "м",          "é",
                                          "e\xCC\x81",  "中文",
                                          "😀",          "👨‍👩‍👧",
                                          "🇯🇵",         "!",
                                          "...",        "<",
                                          "|",          "<|im_start|>",
                                          "<|im_end|>", "<|endoftext|>",
                                          "\xC2\xA0",   "\xE2\x80\xA8",
                                          "\xC2\x85",   "\xFF",
                                          "\xE2\x82"};
  std::mt19937 rng(static_cast<unsigned>(seed) + 11u);
  const Tokenizer& t = tokenizer_for(pre);
  for (int round = 0; round < 300; ++round) {
    std::string s;
    const int n = std::uniform_int_distribution<int>(0, 12)(rng);
    for (int i = 0; i < n; ++i)
      s += parts[std::uniform_int_distribution<std::size_t>(0, parts.size() - 1)(rng)];
    const std::string expected = without_untokenizable_bytes(t, s);
    BOOST_TEST(printable(t.decode(t.encode(s, true))) == printable(expected));
    BOOST_TEST(printable(t.decode(t.encode(s, false))) == printable(expected));
  }
}

BOOST_AUTO_TEST_CASE(ids_outside_the_vocabulary_are_errors_not_crashes) {
  const Token bad[] = {5, 49152};
  BOOST_CHECK_THROW(smollm2().decode(bad), std::out_of_range);
  BOOST_CHECK_THROW(smollm2().token_bytes(-1), std::out_of_range);
  BOOST_CHECK_THROW(smollm2().is_special(1 << 30), std::out_of_range);
}

BOOST_AUTO_TEST_CASE(long_whitespace_and_letter_runs_encode) {
  for (const std::string& s :
       {std::string(200000, ' '), std::string(200000, 'a'), std::string(100000, '\n') + "x"}) {
    BOOST_TEST(smollm2().decode(smollm2().encode(s, true)) == s);
  }
}

BOOST_AUTO_TEST_CASE(encodes_100_kb_of_english_quickly) {
  const std::string paragraph =
      "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
      "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was "
      "the season of Light, it was the season of Darkness, it was the spring of hope, it was the "
      "winter of despair. In 1859, Dickens wrote 45 chapters; readers didn't mind.\n\n";
  std::string text;
  while (text.size() < 100 * 1024) text += paragraph;
  const auto start = std::chrono::steady_clock::now();
  const auto ids = smollm2().encode(text, true);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_MESSAGE("encoded " << text.size() << " bytes into " << ids.size() << " tokens in "
                                << ms << " ms");
  std::cout << "encode 100 KB of English: " << ms << " ms, " << ids.size() << " tokens\n";
  BOOST_TEST(smollm2().decode(ids) == text);
}
