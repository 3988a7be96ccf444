// vocabulary_from_tokenizer_json (declared in tokenizer.hpp): HF `tokenizers` serialization
// (https://github.com/huggingface/tokenizers, tokenizer.json) of a byte-level BPE model, and
// the special tokens and chat template of the tokenizer_config.json beside it.

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/format/tensor_source.hpp"
#include "model/tokenizer/pre_tokenizer.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace actorlm::model {

namespace {

using nlohmann::json;

// One JSON file being read: every error names it and the key.
struct JsonFile {
  std::string path;
  json root;

  explicit JsonFile(std::string p) : path(std::move(p)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ModelFileError(path + ": cannot open: " + std::strerror(errno));
    std::stringstream text;
    text << in.rdbuf();
    try {
      root = json::parse(text.str());
    } catch (const json::parse_error& e) {
      throw ModelFileError(path + ": not valid JSON: " + e.what());
    }
    if (!root.is_object()) fail("(top level)", "is not a JSON object");
  }

  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    throw ModelFileError(path + ": " + std::string(key) + " " + what);
  }

  // nullptr when absent or null.
  static const json* find(const json& object, const char* key) {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }
  const json& require(const json& object, const char* key, std::string_view where,
                      json::value_t type) const {
    const json* v = find(object, key);
    if (v == nullptr) fail(where, "is missing");
    if (v->type() != type)
      fail(where, std::string("is a JSON ") + v->type_name() + ", not " + json(type).type_name());
    return *v;
  }
  std::string string_or(const json& object, const char* key, std::string_view where,
                        std::string fallback) const {
    const json* v = find(object, key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(where, std::string("is a JSON ") + v->type_name() + ", not a string");
    return v->get<std::string>();
  }
  bool bool_or(const json& object, const char* key, std::string_view where, bool fallback) const {
    const json* v = find(object, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean())
      fail(where, std::string("is a JSON ") + v->type_name() + ", not a boolean");
    return v->get<bool>();
  }
  Token id_of(const json& v, std::string_view where) const {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
        v.get<std::int64_t>() > std::numeric_limits<Token>::max()) {
      fail(where, "is " + v.dump() + ", not a token id");
    }
    return v.get<Token>();
  }
};

bool same_word(std::string_view a, std::string_view b) {
  const auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  return std::ranges::equal(a, b, [&](char x, char y) { return lower(x) == lower(y); });
}

// One pre-tokenizer step, described in a word so that sequences compare as lists.
std::string describe_step(const JsonFile& f, const json& step, const std::string& where) {
  const std::string type = f.string_or(step, "type", where + ".type", "");
  if (type == "ByteLevel") {
    if (f.bool_or(step, "add_prefix_space", where + ".add_prefix_space", false))
      return "ByteLevel(add_prefix_space)";
    return f.bool_or(step, "use_regex", where + ".use_regex", true) ? "ByteLevel(regex)"
                                                                    : "ByteLevel";
  }
  if (type == "Digits") {
    return f.bool_or(step, "individual_digits", where + ".individual_digits", false)
               ? "Digits(individual)"
               : "Digits";
  }
  if (type == "Punctuation") {
    return "Punctuation(" + f.string_or(step, "behavior", where + ".behavior", "Isolated") + ")";
  }
  if (type == "Split") {
    const json* pattern = JsonFile::find(step, "pattern");
    std::string regex = "?";
    if (pattern != nullptr && pattern->is_object()) {
      regex = f.string_or(*pattern, "Regex", where + ".pattern.Regex", "");
      if (regex.empty())
        regex = "literal " + f.string_or(*pattern, "String", where + ".pattern.String", "");
    }
    if (regex == PreTokenizer::llama3_regex) regex = "llama3";
    const std::string behavior = f.string_or(step, "behavior", where + ".behavior", "?");
    const bool invert = f.bool_or(step, "invert", where + ".invert", false);
    return "Split(" + regex + ", " + (same_word(behavior, "isolated") ? "isolated" : behavior) +
           (invert ? ", inverted" : "") + ")";
  }
  return type.empty() ? "(no type)" : type;
}

std::string infer_pre(const JsonFile& f) {
  const json* pt = JsonFile::find(f.root, "pre_tokenizer");
  if (pt == nullptr) f.fail("pre_tokenizer", "is missing; only byte-level BPE is supported");
  if (!pt->is_object()) f.fail("pre_tokenizer", "is not an object");
  std::vector<std::string> steps;
  if (f.string_or(*pt, "type", "pre_tokenizer.type", "") == "Sequence") {
    const json& list =
        f.require(*pt, "pretokenizers", "pre_tokenizer.pretokenizers", json::value_t::array);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]";
      if (!list[i].is_object()) f.fail(where, "is not an object");
      steps.push_back(describe_step(f, list[i], where));
    }
  } else {
    steps.push_back(describe_step(f, *pt, "pre_tokenizer"));
  }
  static const std::vector<std::pair<std::string, std::vector<std::string>>> known = {
      {"gpt2", {"ByteLevel(regex)"}},
      {"smollm", {"Digits(individual)", "ByteLevel(regex)"}},
      {"llama-bpe", {"Split(llama3, isolated)", "ByteLevel"}},
      {"falcon",
       {"Punctuation(Contiguous)", "ByteLevel(regex)", "Digits",
        "Split([0-9][0-9][0-9], isolated)"}},
  };
  for (const auto& [name, signature] : known) {
    if (steps == signature) return name;
  }
  std::string seen;
  for (const auto& s : steps) seen += (seen.empty() ? "" : ", ") + s;
  f.fail("pre_tokenizer", "is [" + seen +
                              "], none of the supported ones (those of GPT-2, SmolLM, "
                              "Llama 3 and Falcon)");
}

// bos_token and friends: a string, or an AddedToken object with "content".
Token special_id(const JsonFile& config, const char* key,
                 const std::map<std::string, Token, std::less<>>& ids) {
  const json* v = JsonFile::find(config.root, key);
  if (v == nullptr) return -1;
  std::string text;
  if (v->is_string())
    text = v->get<std::string>();
  else if (v->is_object())
    text = config.string_or(*v, "content", std::string(key) + ".content", "");
  else
    config.fail(key, "is neither a string nor a token object");
  const auto it = ids.find(text);
  if (it == ids.end()) config.fail(key, "'" + text + "' is not a token of the vocabulary");
  return it->second;
}

void read_config(const JsonFile& config, Vocabulary& v) {
  std::map<std::string, Token, std::less<>> ids;
  for (std::size_t i = 0; i < v.tokens.size(); ++i) ids.emplace(v.tokens[i], static_cast<Token>(i));
  v.bos = special_id(config, "bos_token", ids);
  v.eos = special_id(config, "eos_token", ids);
  v.pad = special_id(config, "pad_token", ids);
  if (const Token unk = special_id(config, "unk_token", ids); unk >= 0) v.unk = unk;
  v.add_bos = config.bool_or(config.root, "add_bos_token", "add_bos_token", false);
  if (const json* t = JsonFile::find(config.root, "chat_template")) {
    if (t->is_string()) {
      v.chat_template = t->get<std::string>();
    } else if (t->is_array()) {  // [{"name": ..., "template": ...}]: the default one
      for (const json& named : *t) {
        if (named.is_object() && named.value("name", "") == "default") {
          v.chat_template = named.value("template", "");
        }
      }
    } else {
      config.fail("chat_template", "is neither a string nor a list of named templates");
    }
  }
}

// Without a tokenizer_config.json: a TemplateProcessing post-processor whose single-sequence
// template starts with a special token adds that token first (Llama 3's <|begin_of_text|>).
void read_post_processor(const JsonFile& f, Vocabulary& v) {
  const json* pp = JsonFile::find(f.root, "post_processor");
  if (pp == nullptr || !pp->is_object() || pp->value("type", "") != "TemplateProcessing") return;
  const json* single = JsonFile::find(*pp, "single");
  if (single == nullptr || !single->is_array() || single->empty()) return;
  const json* first = JsonFile::find(single->front(), "SpecialToken");
  if (first == nullptr || !first->is_object()) return;
  const std::string text = first->value("id", "");
  const auto it = std::find(v.tokens.begin(), v.tokens.end(), text);
  if (it == v.tokens.end()) f.fail("post_processor.single[0]", "'" + text + "' is not a token");
  v.bos = static_cast<Token>(it - v.tokens.begin());
  v.add_bos = true;
}

Vocabulary read_tokenizer_json(const std::string& path) {
  const JsonFile f(path);
  const json& model = f.require(f.root, "model", "model", json::value_t::object);
  if (const std::string type = f.string_or(model, "type", "model.type", "BPE"); type != "BPE") {
    f.fail("model.type", "is '" + type + "'; only BPE is supported");
  }
  if (const json* normalizer = JsonFile::find(f.root, "normalizer")) {
    const std::string type = normalizer->is_object() ? normalizer->value("type", "?") : "?";
    f.fail("normalizer", "is set (" + type + "); only byte-level BPE without one is supported");
  }

  // id -> text, from model.vocab then added_tokens (which win, as in HF's decode).
  std::map<Token, std::pair<std::string, std::int32_t>> by_id;  // text, token type
  const json& vocab = f.require(model, "vocab", "model.vocab", json::value_t::object);
  for (const auto& [text, id_json] : vocab.items()) {
    const Token id = f.id_of(id_json, "model.vocab['" + text + "']");
    const auto [it, fresh] = by_id.try_emplace(id, text, 1);
    if (!fresh)
      f.fail("model.vocab", "gives id " + std::to_string(id) + " to both '" + it->second.first +
                                "' and '" + text + "'");
  }
  if (const json* added = JsonFile::find(f.root, "added_tokens")) {
    if (!added->is_array()) f.fail("added_tokens", "is not a list");
    for (std::size_t i = 0; i < added->size(); ++i) {
      const std::string where = "added_tokens[" + std::to_string(i) + "]";
      const json& a = (*added)[i];
      if (!a.is_object()) f.fail(where, "is not an object");
      const json* id_json = JsonFile::find(a, "id");
      if (id_json == nullptr) f.fail(where + ".id", "is missing");
      const Token id = f.id_of(*id_json, where + ".id");
      const std::string content = f.string_or(a, "content", where + ".content", "");
      if (content.empty()) f.fail(where + ".content", "is missing or empty");
      by_id[id] = {content, f.bool_or(a, "special", where + ".special", false) ? 3 : 4};
    }
  }
  if (by_id.empty()) f.fail("model.vocab", "is empty");

  Vocabulary v;
  const auto n = static_cast<std::size_t>(by_id.rbegin()->first) + 1;
  if (n != by_id.size()) {
    Token expected = 0;
    for (const auto& [id, _] : by_id) {
      if (id != expected) break;
      ++expected;
    }
    f.fail("model.vocab", "has no token with id " + std::to_string(expected) + " (ids must be 0.." +
                              std::to_string(n - 1) + " without gaps)");
  }
  v.tokens.reserve(n);
  v.token_types.reserve(n);
  for (auto& [id, entry] : by_id) {
    v.tokens.push_back(std::move(entry.first));
    v.token_types.push_back(entry.second);
  }

  const json& merges = f.require(model, "merges", "model.merges", json::value_t::array);
  v.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {
      v.merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      f.fail("model.merges[" + std::to_string(i) + "]",
             "is neither \"left right\" nor [left, right]");
    }
  }
  v.ignore_merges = f.bool_or(model, "ignore_merges", "model.ignore_merges", false);
  if (const std::string unk = f.string_or(model, "unk_token", "model.unk_token", "");
      !unk.empty()) {
    const auto it = std::find(v.tokens.begin(), v.tokens.end(), unk);
    if (it == v.tokens.end()) f.fail("model.unk_token", "'" + unk + "' is not a token");
    v.unk = static_cast<Token>(it - v.tokens.begin());
  }
  v.pre = infer_pre(f);

  const auto config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    read_config(JsonFile(config_path.string()), v);
  } else {
    read_post_processor(f, v);
  }

  if (const auto problem = find_problem(v)) {
    static const std::map<std::string, std::string, std::less<>> keys = {
        {"tokens", "model.vocab"},
        {"merges", "model.merges"},
        {"token_types", "added_tokens"},
        {"pre", "pre_tokenizer"}};
    const auto key = keys.find(problem->field);
    f.fail(key == keys.end() ? problem->field : key->second, "is invalid: " + problem->message);
  }
  return v;
}

}  // namespace

Vocabulary vocabulary_from_tokenizer_json(const std::string& path) {
  try {
    return read_tokenizer_json(path);
  } catch (const json::exception& e) {  // a value of a type the checks above did not expect
    throw ModelFileError(path + ": unexpected JSON structure: " + e.what());
  }
}

}  // namespace actorlm::model
