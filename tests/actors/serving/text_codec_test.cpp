// TextCodec's switches that vLLM's API exposes: add_special_tokens (the BOS the tokenizer adds),
// the chat template's add_generation_prompt and continue_final_message, and skip_special_tokens,
// on the default model's vocabulary (SmolLM2: <|im_start|> = 1, <|im_end|> = 2) and the sim's
// synthetic codec.
#define BOOST_TEST_MODULE text_codec
#include <boost/test/unit_test.hpp>

#include "actors/serving/text_codec.hpp"
#include "model/format/gguf_file.hpp"

using namespace actorlm;

namespace {

std::unique_ptr<serving::TextCodec> smollm2_codec(bool add_bos) {
  auto v = model::vocabulary_from_gguf(*model::GgufFile::open(ACTORLM_DEFAULT_MODEL));
  v.add_bos = add_bos;
  if (v.bos < 0) v.bos = 0;  // <|endoftext|> stands in when the file names no BOS
  return serving::make_tokenizer_codec(std::make_shared<const model::Tokenizer>(std::move(v)), model::ChatFormat::chatml, "");
}

const std::vector<model::ChatMessage> kQuestion = {{"user", "Capital of France?"}};

std::string text_of(const serving::TextCodec& codec, bool skip_special, const std::vector<model::Token>& tokens) {
  auto d = codec.detokenizer(skip_special);
  std::string s;
  for (auto t : tokens) s += d->push(t);
  return s + d->flush();
}

}  // namespace

BOOST_AUTO_TEST_CASE(add_special_tokens_puts_the_bos_in_front_only_when_the_tokenizer_adds_one) {
  const auto adds = smollm2_codec(true);
  const auto plain = smollm2_codec(false);
  const auto text = plain->raw_prompt("The capital of France is", false);
  const model::Token bos = adds->raw_prompt("x", true).front();
  BOOST_TEST(adds->raw_prompt("The capital of France is", true).size() == text.size() + 1);
  BOOST_TEST(adds->raw_prompt("The capital of France is", false) == text);
  BOOST_TEST(plain->raw_prompt("The capital of France is", true) == text);  // nothing to add
  // Chat: the template's tokens; the BOS on top only when asked (vLLM's chat default: not).
  const auto chat = adds->chat_prompt(kQuestion, {}, false);
  BOOST_TEST(chat == plain->chat_prompt(kQuestion));
  const auto with_bos = adds->chat_prompt(kQuestion, {}, true);
  BOOST_TEST_REQUIRE(with_bos.size() == chat.size() + 1);
  BOOST_TEST(with_bos.front() == bos);
}

BOOST_AUTO_TEST_CASE(chat_prompts_follow_add_generation_prompt_and_continue_final_message) {
  const auto codec = smollm2_codec(false);
  const auto opened = codec->chat_prompt(kQuestion, {true, false}, false);
  const auto closed = codec->chat_prompt(kQuestion, {false, false}, false);
  BOOST_TEST(opened.size() > closed.size());
  BOOST_TEST(closed.back() == 198);  // "\n" after <|im_end|>
  const std::vector<model::ChatMessage> prefilled = {{"user", "Capital of France?"}, {"assistant", "It is"}};
  const auto cont = codec->chat_prompt(prefilled, {false, true}, false);
  BOOST_TEST(text_of(*codec, false, cont) == "<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\nIt is");
}

BOOST_AUTO_TEST_CASE(skip_special_tokens_false_writes_special_tokens_as_their_text) {
  const auto codec = smollm2_codec(false);
  const auto tokens = codec->raw_prompt("Paris.", false);
  std::vector<model::Token> out = tokens;
  out.push_back(2);  // <|im_end|>
  out.push_back(1);  // <|im_start|>
  BOOST_TEST(text_of(*codec, true, out) == "Paris.");
  BOOST_TEST(text_of(*codec, false, out) == "Paris.<|im_end|><|im_start|>");  // no spaces, as vLLM's fast path
}

BOOST_AUTO_TEST_CASE(the_synthetic_codec_continues_the_final_message_without_opening_a_turn) {
  const auto codec = serving::make_synthetic_codec(1000);
  const auto opened = codec->chat_prompt(kQuestion);
  const auto cont = codec->chat_prompt(kQuestion, {false, true}, false);
  BOOST_TEST(cont.size() + 1 == opened.size());
  BOOST_TEST(codec->chat_prompt(kQuestion, {false, false}, false) == cont);
  BOOST_TEST(codec->raw_prompt("a b", true) == codec->raw_prompt("a b", false));  // no BOS
}
