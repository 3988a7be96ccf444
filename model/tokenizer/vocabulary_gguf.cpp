// vocabulary_from_gguf (declared in tokenizer.hpp): the tokenizer.* keys llama.cpp's
// convert_hf_to_gguf.py writes for a byte-level BPE model.

#include <limits>
#include <map>

#include "model/format/gguf_file.hpp"
#include "model/tokenizer/pre_tokenizer.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace actorlm::model {

namespace {

[[noreturn]] void fail(const GgufFile& file, std::string_view key, const std::string& what) {
  throw ModelFileError(file.path() + ": " + std::string(key) + " " + what);
}

template <class T>
T require(const GgufFile& file, std::string_view key, std::optional<T> value) {
  if (!value) fail(file, key, "is missing");
  return std::move(*value);
}

// A token id key: absent means none. 0xFFFFFFFF (a u32 -1) also means none, as in llama.cpp.
Token optional_id(const GgufFile& file, std::string_view key) {
  const auto v = file.get_int(key);
  if (!v || *v == -1 || *v == 0xFFFFFFFFll) return -1;
  if (*v < 0 || *v > std::numeric_limits<Token>::max()) {
    fail(file, key, "is " + std::to_string(*v) + ", not a token id");
  }
  return static_cast<Token>(*v);
}

const std::map<std::string, std::string, std::less<>>& key_of_field() {
  static const std::map<std::string, std::string, std::less<>> keys = {
      {"tokens", "tokenizer.ggml.tokens"},          {"merges", "tokenizer.ggml.merges"},
      {"token_types", "tokenizer.ggml.token_type"}, {"pre", "tokenizer.ggml.pre"},
      {"bos", "tokenizer.ggml.bos_token_id"},       {"eos", "tokenizer.ggml.eos_token_id"},
      {"unk", "tokenizer.ggml.unknown_token_id"},   {"pad", "tokenizer.ggml.padding_token_id"},
  };
  return keys;
}

}  // namespace

Vocabulary vocabulary_from_gguf(const GgufFile& file) {
  const std::string model =
      require(file, "tokenizer.ggml.model", file.get_string("tokenizer.ggml.model"));
  if (model != "gpt2") {
    fail(file, "tokenizer.ggml.model",
         "is '" + model + "'; only byte-level BPE vocabularies ('gpt2') are supported");
  }
  Vocabulary v;
  v.tokens = require(file, "tokenizer.ggml.tokens", file.get_string_array("tokenizer.ggml.tokens"));
  v.merges = require(file, "tokenizer.ggml.merges", file.get_string_array("tokenizer.ggml.merges"));
  if (const auto types = file.get_int_array("tokenizer.ggml.token_type")) {
    v.token_types.reserve(types->size());
    for (const std::int64_t t : *types) {
      if (t < 0 || t > 6)
        fail(file, "tokenizer.ggml.token_type",
             "holds " + std::to_string(t) + ", not a token type (0..6)");
      v.token_types.push_back(static_cast<std::int32_t>(t));
    }
  }
  v.pre = file.get_string("tokenizer.ggml.pre").value_or("gpt2");
  if (!PreTokenizer::is_known(v.pre)) {
    fail(file, "tokenizer.ggml.pre",
         "is '" + v.pre + "', a pre-tokenizer type this tokenizer does not know");
  }
  v.bos = optional_id(file, "tokenizer.ggml.bos_token_id");
  v.eos = optional_id(file, "tokenizer.ggml.eos_token_id");
  v.unk = optional_id(file, "tokenizer.ggml.unknown_token_id");
  v.pad = optional_id(file, "tokenizer.ggml.padding_token_id");
  v.add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
  v.chat_template = file.get_string("tokenizer.chat_template").value_or("");
  // llama.cpp sets ignore_merges for Llama 3 vocabularies, as their tokenizer.json does.
  v.ignore_merges = PreTokenizer::canonical(v.pre) == "llama-bpe";
  if (const auto problem = find_problem(v)) {
    const auto key = key_of_field().find(problem->field);
    fail(file, key == key_of_field().end() ? problem->field : key->second,
         "is invalid: " + problem->message);
  }
  return v;
}

}  // namespace actorlm::model
