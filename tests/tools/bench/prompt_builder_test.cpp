// tools/bench/prompt_builder.hpp: prompts of an exact token length with the default model's
// tokenizer (SmolLM2's GGUF vocabulary), and approximate ones without a tokenizer.
#define BOOST_TEST_MODULE tools_bench_prompt_builder
#include "tools/bench/prompt_builder.hpp"

#include "model/tokenizer/tokenizer.hpp"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <set>

namespace {

using namespace actorlm::bench;
namespace bdata = boost::unit_test::data;

const std::shared_ptr<const actorlm::model::Tokenizer>& smollm2() {
  static const auto t = [] {
    const std::string path = ACTORLM_DEFAULT_MODEL;
    BOOST_REQUIRE_MESSAGE(std::filesystem::exists(path), path + " is missing: run tools/models/fetch_default_model.sh");
    return load_tokenizer_file(path);
  }();
  return t;
}

std::size_t words(const std::string& text) {
  std::size_t n = 0;
  bool in_word = false;
  for (char c : text) {
    if (c != ' ' && !in_word) ++n;
    in_word = c != ' ';
  }
  return n;
}

}  // namespace

BOOST_DATA_TEST_CASE(builds_prompts_that_encode_to_exactly_the_asked_tokens,
                     bdata::make({1u, 2u, 7u, 64u, 500u, 2048u}), tokens) {
  PromptBuilder builder(smollm2(), 11);
  BOOST_TEST(builder.exact());
  for (int i = 0; i < 3; ++i) {
    const auto text = builder.build(tokens);
    BOOST_TEST(builder.count(text).value() == tokens);
    BOOST_TEST(smollm2()->encode(text, false).size() + (smollm2()->vocabulary().add_bos ? 1 : 0) == tokens);
  }
}

BOOST_AUTO_TEST_CASE(prompts_differ_between_requests_and_repeat_for_a_seed) {
  PromptBuilder a(smollm2(), 5), b(smollm2(), 5);
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) {
    const auto text = a.build(32);
    BOOST_TEST(text == b.build(32));
    seen.insert(text);
  }
  BOOST_TEST(seen.size() == 20u);
}

BOOST_AUTO_TEST_CASE(without_a_tokenizer_a_prompt_is_one_short_word_per_token) {
  PromptBuilder builder(3);
  BOOST_TEST(!builder.exact());
  BOOST_TEST(!builder.count("anything").has_value());
  for (std::uint32_t n : {1u, 10u, 300u}) {
    const auto text = builder.build(n);
    BOOST_TEST(words(text) == n);
    for (std::size_t i = 0, start = 0; i <= text.size(); ++i)  // every word at most 4 bytes
      if (i == text.size() || text[i] == ' ') {
        BOOST_TEST(i - start <= 4u);
        start = i + 1;
      }
  }
}
