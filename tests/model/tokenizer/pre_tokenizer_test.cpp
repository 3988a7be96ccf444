// PreTokenizer (PCRE2) against HF tokenizers' pre_tokenizers (Oniguruma) on the golden texts:
// the same pieces for each type, compared in the byte-level spelling HF returns them in.
#define BOOST_TEST_MODULE model_tokenizer_pre_tokenizer
#include "model/tokenizer/pre_tokenizer.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <random>

#include "model/tokenizer/byte_level.hpp"
#include "tests/model/tokenizer/tokenizer_fixtures.hpp"

namespace data = boost::unit_test::data;
using namespace actorlm::model;
using namespace actorlm::model::test;

BOOST_AUTO_TEST_CASE(the_hf_goldens_load) {
  BOOST_TEST_REQUIRE(goldens().error == "");
  BOOST_TEST(goldens().cases.size() > 50u);
}

BOOST_DATA_TEST_CASE(splits_each_text_into_the_pieces_hf_tokenizers_makes,
                     data::make(kPreTypes) * data::make(case_indices()), pre, index) {
  const GoldenCase& c = goldens().cases[index];
  const PreTokenizer p(pre);
  std::vector<std::string> pieces;
  for (const std::string_view piece : p.split(c.text)) pieces.push_back(byte_level::encode(piece));
  BOOST_TEST_CONTEXT("pre " << pre << ", text " << printable(c.text)) {
    BOOST_TEST(pieces == c.pieces_by_pre.at(pre), boost::test_tools::per_element());
  }
}

// Pieces tile the text exactly, none empty, for any bytes at all.
BOOST_DATA_TEST_CASE(pieces_cover_random_bytes_exactly,
                     data::make(kPreTypes) * data::make(indices(3)), pre, seed) {
  const PreTokenizer p(pre);
  std::mt19937 rng(static_cast<unsigned>(seed) + 5u);
  for (int round = 0; round < 300; ++round) {
    std::string s(std::uniform_int_distribution<int>(0, 64)(rng), '\0');
    for (char& c : s) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    const auto pieces = p.split(s);
    std::size_t at = 0;
    for (const std::string_view piece : pieces) {
      BOOST_TEST(!piece.empty());
      BOOST_TEST(piece.data() == s.data() + at);
      at += piece.size();
    }
    BOOST_TEST(at == s.size());
  }
}

BOOST_AUTO_TEST_CASE(gpt2_splits_contractions_words_numbers_and_trailing_space) {
  const PreTokenizer p("gpt2");
  const auto pieces = p.split("I'm  42 go!\n");
  const std::vector<std::string_view> expected = {"I", "'m", " ", " 42", " go", "!", "\n"};
  BOOST_TEST(pieces == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(aliases_name_the_same_split) {
  BOOST_TEST(PreTokenizer::canonical("llama3") == "llama-bpe");
  BOOST_TEST(PreTokenizer::canonical("starcoder") == "smollm");
  BOOST_TEST(PreTokenizer::canonical("gpt-2") == "gpt2");
  const std::string text = "Numbers 12345 and   spaces\n";
  BOOST_TEST(PreTokenizer("llama3").split(text) == PreTokenizer("llama-bpe").split(text),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_unknown_type_is_an_error_naming_it) {
  BOOST_TEST(!PreTokenizer::is_known("qwen2"));
  try {
    PreTokenizer p("qwen2");
    BOOST_FAIL("no error");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find("'qwen2'") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("smollm") != std::string::npos);
  }
}
