// vocabulary_from_gguf and vocabulary_from_tokenizer_json: the default model's GGUF and the
// tokenizer.json HF tokenizers wrote for the same tokenizer (fixtures/smollm2/) agree and encode
// the goldens alike; broken metadata is a ModelFileError naming the file and the key.
#define BOOST_TEST_MODULE model_tokenizer_vocabulary
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <functional>

#include "model/tokenizer/byte_level.hpp"
#include "model/tokenizer/pre_tokenizer.hpp"
#include "tests/model/format/format_builder.hpp"
#include "tests/model/tokenizer/tokenizer_fixtures.hpp"

namespace data = boost::unit_test::data;
using namespace actorlm::model;
using namespace actorlm::model::test;
using nlohmann::json;

namespace {

const std::string kJsonFixture = std::string(kFixtures) + "/smollm2/tokenizer.json";

const Tokenizer& from_json() {
  static const Tokenizer t(vocabulary_from_tokenizer_json(kJsonFixture));
  return t;
}

// Runs `f`, which must throw a ModelFileError whose message has each of `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    BOOST_ERROR("no error; expected one mentioning " << parts.front());
  } catch (const ModelFileError& e) {
    BOOST_TEST_MESSAGE(e.what());
    for (const auto& p : parts) {
      BOOST_TEST(std::string(e.what()).find(p) != std::string::npos,
                 "'" << e.what() << "' lacks '" << p << "'");
    }
  }
}

// --- a small GGUF: the 256 byte tokens, "ab" (merge "a b") and a control token --------------

struct Kv {
  std::uint32_t type;
  Bytes value;
};
using Metadata = std::map<std::string, Kv>;

Bytes string_array(const std::vector<std::string>& items) {
  Bytes b = concat({le<std::uint32_t>(STRING), le<std::uint64_t>(items.size())});
  for (const auto& s : items) put_string(b, s);
  return b;
}

Bytes i32_array(const std::vector<std::int32_t>& items) {
  Bytes b = concat({le<std::uint32_t>(I32), le<std::uint64_t>(items.size())});
  for (const auto v : items) put(b, v);
  return b;
}

Metadata small_gguf_metadata() {
  std::vector<std::string> tokens(byte_level::spellings().begin(), byte_level::spellings().end());
  tokens.push_back("ab");
  tokens.push_back("<|end|>");
  std::vector<std::int32_t> types(tokens.size(), 1);
  types.back() = 3;
  return {{"tokenizer.ggml.model", {STRING, str_bytes("gpt2")}},
          {"tokenizer.ggml.pre", {STRING, str_bytes("smollm")}},
          {"tokenizer.ggml.tokens", {ARRAY, string_array(tokens)}},
          {"tokenizer.ggml.merges", {ARRAY, string_array({"a b"})}},
          {"tokenizer.ggml.token_type", {ARRAY, i32_array(types)}},
          {"tokenizer.ggml.eos_token_id", {U32, le<std::uint32_t>(257)}},
          {"tokenizer.chat_template", {STRING, str_bytes("{{ '<|im_start|>' }}")}}};
}

Vocabulary load_gguf(const TempDir& dir, const Metadata& m) {
  GgufBuilder b;
  for (const auto& [key, kv] : m) b.kv(key, kv.type, kv.value);
  const auto file = GgufFile::open(dir.write("tokenizer.gguf", b.build()));
  return vocabulary_from_gguf(*file);
}

struct GgufCase {
  std::string name;
  std::function<void(Metadata&)> mutate;
  std::string key;   // the message must name it
  std::string what;  // and say this
};

std::ostream& operator<<(std::ostream& os, const GgufCase& c) { return os << c.name; }

std::function<void(Metadata&)> drop(std::string key) {
  return [key](Metadata& m) { m.erase(key); };
}

std::function<void(Metadata&)> set(std::string key, std::uint32_t type, Bytes value) {
  return [=](Metadata& m) { m[key] = {type, value}; };
}

const std::vector<GgufCase> kBrokenGguf = {
    {"no model", drop("tokenizer.ggml.model"), "tokenizer.ggml.model", "missing"},
    {"sentencepiece model", set("tokenizer.ggml.model", STRING, str_bytes("llama")),
     "tokenizer.ggml.model", "'llama'"},
    {"no tokens", drop("tokenizer.ggml.tokens"), "tokenizer.ggml.tokens", "missing"},
    {"tokens not strings", set("tokenizer.ggml.tokens", U32, le<std::uint32_t>(7)),
     "tokenizer.ggml.tokens", "u32"},
    {"no merges", drop("tokenizer.ggml.merges"), "tokenizer.ggml.merges", "missing"},
    {"merge without a space", set("tokenizer.ggml.merges", ARRAY, string_array({"ab"})),
     "tokenizer.ggml.merges", "'ab' is not two tokens"},
    {"merge of an unknown token", set("tokenizer.ggml.merges", ARRAY, string_array({"a zz"})),
     "tokenizer.ggml.merges", "'zz' is not a token"},
    {"merge into an unknown token", set("tokenizer.ggml.merges", ARRAY, string_array({"b c"})),
     "tokenizer.ggml.merges", "'bc' is not a token"},
    {"too few token types", set("tokenizer.ggml.token_type", ARRAY, i32_array({1, 1, 1})),
     "tokenizer.ggml.token_type", "3 token types for 258 tokens"},
    {"token type out of range",
     set("tokenizer.ggml.token_type", ARRAY, i32_array(std::vector<std::int32_t>(258, 9))),
     "tokenizer.ggml.token_type", "9"},
    {"unknown pre-tokenizer", set("tokenizer.ggml.pre", STRING, str_bytes("qwen2")),
     "tokenizer.ggml.pre", "'qwen2'"},
    {"bos beyond the vocabulary", set("tokenizer.ggml.bos_token_id", U32, le<std::uint32_t>(1000)),
     "tokenizer.ggml.bos_token_id", "1000"},
    {"eos as a string", set("tokenizer.ggml.eos_token_id", STRING, str_bytes("2")),
     "tokenizer.ggml.eos_token_id", "string"},
};

// --- a small tokenizer.json with the same tokens ---------------------------------------------

json small_tokenizer_json() {
  json vocab = json::object();
  for (unsigned b = 0; b < 256; ++b) vocab[byte_level::spellings()[b]] = b;
  vocab["ab"] = 256;
  vocab["<|end|>"] = 257;
  return {
      {"version", "1.0"},
      {"added_tokens", json::array({{{"id", 257}, {"content", "<|end|>"}, {"special", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Digits"}, {"individual_digits", true}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({json::array({"a", "b"})})}}}};
}

struct JsonCase {
  std::string name;
  std::function<void(json&)> mutate;
  std::string key;
  std::string what;
};

std::ostream& operator<<(std::ostream& os, const JsonCase& c) { return os << c.name; }

const std::vector<JsonCase> kBrokenJson = {
    {"top level is a list", [](json& j) { j = json::array(); }, "(top level)", "not a JSON object"},
    {"no model", [](json& j) { j.erase("model"); }, "model", "missing"},
    {"WordPiece model", [](json& j) { j["model"]["type"] = "WordPiece"; }, "model.type",
     "'WordPiece'"},
    {"no vocab", [](json& j) { j["model"].erase("vocab"); }, "model.vocab", "missing"},
    {"vocab is a list", [](json& j) { j["model"]["vocab"] = json::array(); }, "model.vocab",
     "array"},
    {"negative id", [](json& j) { j["model"]["vocab"]["ab"] = -4; }, "model.vocab['ab']", "-4"},
    {"id as text", [](json& j) { j["model"]["vocab"]["ab"] = "256"; }, "model.vocab['ab']",
     "not a token id"},
    {"a gap in the ids", [](json& j) { j["model"]["vocab"]["ab"] = 300; }, "model.vocab",
     "no token with id 256"},
    {"two tokens, one id", [](json& j) { j["model"]["vocab"]["zz"] = 256; }, "model.vocab",
     "id 256"},
    {"no merges", [](json& j) { j["model"].erase("merges"); }, "model.merges", "missing"},
    {"merge is a number", [](json& j) { j["model"]["merges"] = json::array({7}); },
     "model.merges[0]", "neither"},
    {"merge of an unknown token", [](json& j) { j["model"]["merges"] = json::array({"a zz"}); },
     "model.merges", "'zz' is not a token"},
    {"a normalizer",
     [](json& j) {
       j["normalizer"] = {{"type", "NFC"}};
     },
     "normalizer", "NFC"},
    {"no pre-tokenizer", [](json& j) { j.erase("pre_tokenizer"); }, "pre_tokenizer", "missing"},
    {"whitespace pre-tokenizer",
     [](json& j) {
       j["pre_tokenizer"] = {{"type", "Whitespace"}};
     },
     "pre_tokenizer", "[Whitespace]"},
    {"digits not individual",
     [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false; },
     "pre_tokenizer", "[Digits, ByteLevel(regex)]"},
    {"prefix space",
     [](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; },
     "pre_tokenizer", "add_prefix_space"},
    {"use_regex not a boolean",
     [](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = "yes"; },
     "pre_tokenizer.pretokenizers[1].use_regex", "not a boolean"},
    {"added token without id", [](json& j) { j["added_tokens"][0].erase("id"); },
     "added_tokens[0].id", "missing"},
    {"unknown unk_token", [](json& j) { j["model"]["unk_token"] = "<unk>"; }, "model.unk_token",
     "'<unk>'"},
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_default_model_has_smollm2s_tokenizer_metadata) {
  const Vocabulary& v = smollm2_vocabulary();
  BOOST_TEST(v.tokens.size() == 49152u);
  BOOST_TEST(v.merges.size() == 48900u);
  BOOST_TEST(v.pre == "smollm");
  BOOST_TEST(v.bos == 1);
  BOOST_TEST(v.eos == 2);
  BOOST_TEST(v.unk == 0);
  BOOST_TEST(v.pad == 2);
  BOOST_TEST(!v.add_bos);
  BOOST_TEST(!v.ignore_merges);
  BOOST_TEST(std::count(v.token_types.begin(), v.token_types.end(), 3) == 17);
  BOOST_TEST(v.chat_template.find("<|im_start|>") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tokenizer_json_gives_the_same_vocabulary_as_the_gguf) {
  const Vocabulary& g = smollm2_vocabulary();
  const Vocabulary& j = from_json().vocabulary();
  BOOST_TEST(j.tokens == g.tokens);
  BOOST_TEST(j.merges == g.merges);
  BOOST_TEST(j.token_types == g.token_types);
  BOOST_TEST(j.pre == g.pre);
  BOOST_TEST(j.bos == g.bos);
  BOOST_TEST(j.eos == g.eos);
  BOOST_TEST(j.unk == g.unk);
  BOOST_TEST(j.pad == g.pad);
  BOOST_TEST(j.add_bos == g.add_bos);
  BOOST_TEST(j.ignore_merges == g.ignore_merges);
  BOOST_TEST(j.chat_template == g.chat_template);
}

BOOST_DATA_TEST_CASE(a_tokenizer_from_tokenizer_json_encodes_the_goldens,
                     data::make({true, false}) * data::make(case_indices()), parse_special, index) {
  const GoldenCase& c = goldens().cases[index];
  BOOST_TEST_CONTEXT("text " << printable(c.text)) {
    BOOST_TEST(from_json().encode(c.text, parse_special) == (parse_special ? c.ids : c.ids_plain),
               boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(a_small_gguf_vocabulary_loads_and_merges) {
  const TempDir dir;
  const Vocabulary v = load_gguf(dir, small_gguf_metadata());
  BOOST_TEST(v.tokens.size() == 258u);
  BOOST_TEST(v.eos == 257);
  BOOST_TEST(v.bos == -1);
  BOOST_TEST(v.pre == "smollm");
  const Tokenizer t(v);
  BOOST_TEST(t.encode("ab<|end|>", true) == (std::vector<Token>{256, 257}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_gguf_without_pre_is_split_like_gpt2) {
  const TempDir dir;
  Metadata m = small_gguf_metadata();
  m.erase("tokenizer.ggml.pre");
  BOOST_TEST(load_gguf(dir, m).pre == "gpt2");
  m["tokenizer.ggml.pre"] = {STRING, str_bytes("llama-bpe")};
  BOOST_TEST(load_gguf(dir, m).ignore_merges);
}

BOOST_DATA_TEST_CASE(broken_gguf_tokenizer_metadata_is_an_error_naming_file_and_key,
                     data::make(kBrokenGguf), c) {
  const TempDir dir;
  Metadata m = small_gguf_metadata();
  c.mutate(m);
  expect_error([&] { load_gguf(dir, m); },
               {(dir.path() / "tokenizer.gguf").string(), c.key, c.what});
}

BOOST_AUTO_TEST_CASE(merges_may_be_strings_or_pairs) {
  const TempDir dir;
  json j = small_tokenizer_json();
  const Vocabulary pairs = vocabulary_from_tokenizer_json(dir.write("tokenizer.json", j.dump()));
  j["model"]["merges"] = json::array({"a b"});
  const Vocabulary strings = vocabulary_from_tokenizer_json(dir.write("tokenizer.json", j.dump()));
  BOOST_TEST(pairs.merges == strings.merges);
  BOOST_TEST(pairs.merges == std::vector<std::string>{"a b"});
  BOOST_TEST(pairs.token_types[257] == 3);
  BOOST_TEST(pairs.pre == "smollm");
}

BOOST_AUTO_TEST_CASE(infers_llama3_and_falcon_pre_tokenizers_and_a_template_bos) {
  const TempDir dir;
  json j = small_tokenizer_json();
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", std::string(PreTokenizer::llama3_regex)}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  j["model"]["ignore_merges"] = true;
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<|end|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
  const Vocabulary llama = vocabulary_from_tokenizer_json(dir.write("tokenizer.json", j.dump()));
  BOOST_TEST(llama.pre == "llama-bpe");
  BOOST_TEST(llama.ignore_merges);
  BOOST_TEST(llama.bos == 257);
  BOOST_TEST(llama.add_bos);

  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Punctuation"}, {"behavior", "Contiguous"}},
                                     {{"type", "ByteLevel"},
                                      {"add_prefix_space", false},
                                      {"trim_offsets", true},
                                      {"use_regex", true}},
                                     {{"type", "Digits"}, {"individual_digits", false}},
                                     {{"type", "Split"},
                                      {"pattern", {{"Regex", "[0-9][0-9][0-9]"}}},
                                      {"behavior", "Isolated"},
                                      {"invert", false}}})}};
  BOOST_TEST(vocabulary_from_tokenizer_json(dir.write("tokenizer.json", j.dump())).pre == "falcon");
}

BOOST_DATA_TEST_CASE(broken_tokenizer_json_is_an_error_naming_file_and_key, data::make(kBrokenJson),
                     c) {
  const TempDir dir;
  json j = small_tokenizer_json();
  c.mutate(j);
  const std::string path = dir.write("tokenizer.json", j.dump());
  expect_error([&] { vocabulary_from_tokenizer_json(path); }, {path, c.key, c.what});
}

BOOST_AUTO_TEST_CASE(unreadable_or_invalid_json_is_an_error_naming_the_file) {
  const TempDir dir;
  const std::string missing = (dir.path() / "absent.json").string();
  expect_error([&] { vocabulary_from_tokenizer_json(missing); }, {missing, "cannot open"});
  const std::string truncated =
      dir.write("tokenizer.json", small_tokenizer_json().dump().substr(0, 300));
  expect_error([&] { vocabulary_from_tokenizer_json(truncated); }, {truncated, "not valid JSON"});
}

BOOST_AUTO_TEST_CASE(a_broken_tokenizer_config_is_an_error_naming_it) {
  const TempDir dir;
  const std::string path = dir.write("tokenizer.json", small_tokenizer_json().dump());
  const std::string config = dir.write("tokenizer_config.json", json{{"bos_token", "<s>"}}.dump());
  expect_error([&] { vocabulary_from_tokenizer_json(path); }, {config, "bos_token", "'<s>'"});
  dir.write("tokenizer_config.json",
            json{{"eos_token", {{"content", "<|end|>"}}},
                 {"chat_template", json::array({{{"name", "default"}, {"template", "T"}}})}}
                .dump());
  const Vocabulary v = vocabulary_from_tokenizer_json(path);
  BOOST_TEST(v.eos == 257);
  BOOST_TEST(v.chat_template == "T");
  dir.write("tokenizer_config.json", json{{"chat_template", json::array({{{"name", 5}}})}}.dump());
  expect_error([&] { vocabulary_from_tokenizer_json(path); }, {path, "unexpected JSON structure"});
}

BOOST_AUTO_TEST_CASE(the_tokenizer_rejects_a_vocabulary_with_problems) {
  Vocabulary v;
  BOOST_CHECK_THROW(Tokenizer{v}, std::invalid_argument);
  v.tokens = {"a", "b"};
  v.pre = "qwen2";
  BOOST_CHECK_THROW(Tokenizer{v}, std::invalid_argument);
  v.pre = "gpt2";
  v.merges = {"a c"};
  BOOST_CHECK_THROW(Tokenizer{v}, std::invalid_argument);
  v.merges.clear();
  v.eos = 2;
  BOOST_CHECK_THROW(Tokenizer{v}, std::invalid_argument);
}
