// IncrementalDetokenizer: token by token it emits only whole, valid UTF-8, and all it emits
// equals the batch decode (for valid text) or Python's errors="replace" decode (for random ids,
// fixtures/tokenizer_goldens.json random_sequences).
#define BOOST_TEST_MODULE model_tokenizer_detokenizer
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "model/tokenizer/byte_level.hpp"
#include "model/tokenizer/utf8.hpp"
#include "tests/model/tokenizer/tokenizer_fixtures.hpp"

namespace data = boost::unit_test::data;
using namespace actorlm::model;
using namespace actorlm::model::test;

namespace {

// Pushes every id, checking each chunk; returns all chunks and the flush joined.
std::string stream(const std::vector<Token>& ids, bool flush = true) {
  IncrementalDetokenizer d(smollm2());
  std::string out;
  for (const Token t : ids) {
    const std::string chunk = d.push(t);
    BOOST_TEST(utf8::is_valid(chunk), "chunk " << printable(chunk) << " is not valid UTF-8");
    out += chunk;
  }
  if (flush) {
    const std::string rest = d.flush();
    BOOST_TEST(utf8::is_valid(rest));
    out += rest;
  }
  return out;
}

Token byte_token(unsigned char b) {
  const auto& tokens = smollm2().vocabulary().tokens;
  const auto it = std::find(tokens.begin(), tokens.end(), byte_level::spellings()[b]);
  BOOST_TEST_REQUIRE((it != tokens.end()), "SmolLM2 has no token for byte " << int{b});
  return static_cast<Token>(it - tokens.begin());
}

std::vector<Token> byte_tokens(std::string_view bytes) {
  std::vector<Token> ids;
  for (const char c : bytes) ids.push_back(byte_token(static_cast<unsigned char>(c)));
  return ids;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_hf_goldens_load) {
  BOOST_TEST_REQUIRE(goldens().error == "");
  BOOST_TEST(goldens().random.size() >= 100u);
}

BOOST_DATA_TEST_CASE(streaming_a_golden_encoding_gives_its_text_in_valid_chunks,
                     data::make(case_indices()), index) {
  const GoldenCase& c = goldens().cases[index];
  BOOST_TEST_CONTEXT("text " << printable(c.text)) {
    const std::string streamed = stream(c.ids);  // checks every chunk is valid UTF-8
    if (utf8::is_valid(c.decoded)) BOOST_TEST(printable(streamed) == printable(c.decoded));
  }
}

BOOST_DATA_TEST_CASE(streaming_random_tokens_gives_what_python_decodes_with_replacement,
                     data::make(indices(goldens().random.size())), index) {
  const RandomSequence& r = goldens().random[index];
  BOOST_TEST(printable(stream(r.ids)) == printable(r.text));
}

BOOST_AUTO_TEST_CASE(holds_a_character_until_its_last_byte_arrives) {
  IncrementalDetokenizer d(smollm2());
  const auto ids = byte_tokens("\xF0\x9F\x98\x80!");  // U+1F600 then "!"
  BOOST_TEST(d.push(ids[0]) == "");
  BOOST_TEST(d.push(ids[1]) == "");
  BOOST_TEST(d.push(ids[2]) == "");
  BOOST_TEST(d.push(ids[3]) == "\xF0\x9F\x98\x80");
  BOOST_TEST(d.push(ids[4]) == "!");
  BOOST_TEST(d.flush() == "");
}

BOOST_AUTO_TEST_CASE(flush_replaces_an_incomplete_tail_with_one_replacement_character) {
  IncrementalDetokenizer d(smollm2());
  for (const Token t : byte_tokens("ab\xE2\x82")) d.push(t);
  BOOST_TEST(d.flush() == "\xEF\xBF\xBD");
  BOOST_TEST(d.flush() == "");
}

BOOST_AUTO_TEST_CASE(bytes_no_later_token_can_complete_are_replaced_at_once) {
  IncrementalDetokenizer d(smollm2());
  const auto ids = byte_tokens(
      "\xE2\x82"
      "A\x80"
      "B");
  BOOST_TEST(d.push(ids[0]) == "");
  BOOST_TEST(d.push(ids[1]) == "");
  BOOST_TEST(d.push(ids[2]) ==
             "\xEF\xBF\xBD"
             "A");                               // E2 82 cut short by "A"
  BOOST_TEST(d.push(ids[3]) == "\xEF\xBF\xBD");  // a lone continuation byte
  BOOST_TEST(d.push(ids[4]) == "B");
}

BOOST_AUTO_TEST_CASE(special_tokens_stream_as_their_text) {
  BOOST_TEST(stream({1, 2, 0}) == "<|im_start|><|im_end|><|endoftext|>");
}

BOOST_AUTO_TEST_CASE(an_out_of_range_id_is_an_error) {
  IncrementalDetokenizer d(smollm2());
  BOOST_CHECK_THROW(d.push(-3), std::out_of_range);
  BOOST_CHECK_THROW(d.push(49152), std::out_of_range);
}
