#pragma once
// Shared by the tokenizer suites: the goldens made by HF `tokenizers`
// (tools/models/make_tokenizer_fixtures.py -> fixtures/tokenizer_goldens.json) and tokenizers
// over the default model's vocabulary, each loaded once. A missing or broken fixture leaves the
// goldens empty with `error` set, which the suites' first test reports.

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/format/gguf_file.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace actorlm::model::test {

inline const char* const kFixtures = ACTORLM_TOKENIZER_FIXTURES;
inline const char* const kDefaultModel = ACTORLM_DEFAULT_MODEL;
inline const std::vector<std::string> kPreTypes = {"smollm", "gpt2", "llama-bpe", "falcon"};

struct GoldenCase {
  std::string text;
  std::string decoded;           // the ids' bytes: `text` less the bytes without a token
  std::vector<Token> ids;        // smollm, special tokens parsed
  std::vector<Token> ids_plain;  // smollm, special tokens as text
  std::map<std::string, std::vector<Token>> ids_by_pre;
  std::map<std::string, std::vector<std::string>> pieces_by_pre;  // byte-level spelled
};

struct RandomSequence {
  std::vector<Token> ids;
  std::string text;  // the ids' bytes, decoded by Python with errors="replace"
};

struct ChatGolden {
  std::string format, conversation;
  bool add_generation_prompt = false;
  std::string text;
};

struct Goldens {
  std::string error;
  std::vector<GoldenCase> cases;
  std::vector<RandomSequence> random;
  std::vector<ChatGolden> chat;
  std::string default_system;
};

inline Goldens load_goldens() {
  Goldens g;
  try {
    const std::string path = std::string(kFixtures) + "/tokenizer_goldens.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    const auto j = nlohmann::json::parse(in);
    for (const auto& c : j.at("cases")) {
      GoldenCase gc;
      gc.text = c.at("text");
      const std::string hex = c.at("decoded_hex");
      for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
        gc.decoded += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
      }
      gc.ids = c.at("ids").get<std::vector<Token>>();
      gc.ids_plain = c.at("ids_plain").get<std::vector<Token>>();
      gc.ids_by_pre = c.at("ids_by_pre").get<std::map<std::string, std::vector<Token>>>();
      gc.pieces_by_pre =
          c.at("pieces_by_pre").get<std::map<std::string, std::vector<std::string>>>();
      g.cases.push_back(std::move(gc));
    }
    for (const auto& r : j.at("random_sequences")) {
      g.random.push_back({r.at("ids").get<std::vector<Token>>(), r.at("text")});
    }
    for (const auto& c : j.at("chat")) {
      g.chat.push_back(
          {c.at("format"), c.at("conversation"), c.at("add_generation_prompt"), c.at("text")});
    }
    g.default_system = j.at("default_system");
  } catch (const std::exception& e) {
    g = Goldens{};
    g.error = e.what();
  }
  return g;
}

inline const Goldens& goldens() {
  static const Goldens g = load_goldens();
  return g;
}

inline const Vocabulary& smollm2_vocabulary() {
  static const Vocabulary v = vocabulary_from_gguf(*GgufFile::open(kDefaultModel));
  return v;
}

// The default model's vocabulary split by pre-tokenizer `pre` (ignore_merges as a GGUF of that
// type would set it), built once per type.
inline const Tokenizer& tokenizer_for(const std::string& pre) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(pre);
  if (it == cache.end()) {
    Vocabulary v = smollm2_vocabulary();
    v.pre = pre;
    v.ignore_merges = pre == "llama-bpe";
    it = cache.emplace(pre, Tokenizer(std::move(v))).first;
  }
  return it->second;
}

inline const Tokenizer& smollm2() { return tokenizer_for("smollm"); }

// Bytes as C escapes, for messages about texts with control characters or partial UTF-8.
inline std::string printable(std::string_view s) {
  std::ostringstream out;
  out << '"';
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b == '"' || b == '\\')
      out << '\\' << c;
    else if (b >= 0x20 && b < 0x7F)
      out << c;
    else
      out << "\\x"
          << "0123456789abcdef"[b >> 4] << "0123456789abcdef"[b & 15];
  }
  out << '"';
  return out.str();
}

// 0 .. n-1, as a dataset (data::xrange trips -Wmaybe-uninitialized in Boost 1.74's headers).
inline std::vector<std::size_t> indices(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

inline std::vector<std::size_t> case_indices() { return indices(goldens().cases.size()); }

}  // namespace actorlm::model::test
