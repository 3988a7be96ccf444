#pragma once
// Byte-level BPE tokenizer (GPT-2 style, as HF tokenizers' BPE + ByteLevel): special tokens are
// matched verbatim first (control tokens only when asked, user-defined ones always), the text
// between them is split by the model's pre-tokenizer regexes (pre_tokenizer.hpp), and each
// piece's bytes, spelled as printable code points (byte_level.hpp), are merged by merge rank.
// Golden-tested against HF tokenizers on SmolLM2's vocabulary (tests/model/tokenizer/).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::model {

class GgufFile;

using Token = std::int32_t;

// What a tokenizer is built from, whatever the source (GGUF metadata, tokenizer.json).
struct Vocabulary {
  std::vector<std::string> tokens;        // [n_vocab], byte-level encoded as stored in the file
  std::vector<std::string> merges;        // "left right", rank = index
  std::vector<std::int32_t> token_types;  // [n_vocab] GGUF: 1 normal, 2 unknown, 3 control,
                                          // 4 user-defined, 5 unused, 6 byte (empty: all normal)
  std::string pre = "gpt2";               // pre-tokenizer name (GGUF tokenizer.ggml.pre)
  Token bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = false;
  std::string chat_template;   // Jinja source as stored, used to pick a ChatFormat
  bool ignore_merges = false;  // a piece that is a token is taken whole, unmerged
                               // (HF BPE ignore_merges; llama.cpp does it for llama-bpe)
};

// What is wrong with a vocabulary, if anything: `field` names the Vocabulary member ("tokens",
// "merges", "token_types", "pre", "bos", ...) so a loader can name its own key.
struct VocabularyProblem {
  std::string field;
  std::string message;
};
// Checks sizes, special ids, the pre-tokenizer name, and that every merge is "left right" with
// left, right and left+right all tokens.
std::optional<VocabularyProblem> find_problem(const Vocabulary& vocab);

// Throws ModelFileError (model/format/tensor_source.hpp) naming the file and key on bad metadata.
// GGUF: tokenizer.ggml.model must be "gpt2"; a missing tokenizer.ggml.pre means "gpt2".
Vocabulary vocabulary_from_gguf(const GgufFile& file);
// HF tokenizer.json (model.type BPE, byte-level, no normalizer); the pre-tokenizer type is
// inferred from its pre_tokenizer. Special ids, add_bos and the chat template come from a
// tokenizer_config.json in the same folder when there is one (else bos from a
// TemplateProcessing post-processor that starts with a special token); unk also from
// model.unk_token. (`unk` is informational: encode drops bytes it has no token for.)
Vocabulary vocabulary_from_tokenizer_json(const std::string& path);

class Tokenizer {
 public:
  // Throws std::invalid_argument on an unknown `pre` or any other find_problem().
  explicit Tokenizer(Vocabulary vocab);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // parse_special: control tokens written in the text ("<|im_start|>") become their ids;
  // otherwise they are encoded as plain text. User-defined tokens (type 4) are always matched
  // whole, as HF tokenizers (non-special added tokens) and llama.cpp do. Matching is
  // leftmost-longest. No BOS is added. Any bytes are accepted (invalid UTF-8 is encoded byte by
  // byte), but a byte whose spelling is not in the vocabulary is dropped, as HF (BPE without
  // unk_token) and llama.cpp do: SmolLM2 has no token for 0x04, 0xF1 or 0xFF, for example.
  // Thread-safe.
  std::vector<Token> encode(std::string_view text, bool parse_special) const;
  // Raw bytes of the tokens joined (may end in an incomplete UTF-8 sequence).
  // Throws std::out_of_range on an id outside [0, size()).
  std::string decode(std::span<const Token> tokens) const;
  // The decoded bytes of one token: control and user-defined tokens are their text.
  std::string_view token_bytes(Token t) const;
  bool is_special(Token t) const;  // control (3) or user-defined (4)
  bool is_control(Token t) const;  // control (3): <|im_end|>, <|eot_id|>, ...
  std::size_t size() const;
  const Vocabulary& vocabulary() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of tokens into text, never emitting a broken UTF-8 sequence: bytes of an
// incomplete character are held until the character completes.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  // The text that became complete: whole characters only, each invalid byte sequence (one that
  // no further bytes can complete) replaced by U+FFFD as soon as it is seen. Concatenating all
  // pushes and the flush gives the tokens' bytes decoded as Python's errors="replace" does.
  std::string push(Token t);
  std::string flush();  // at the end: the rest, an incomplete tail replaced by U+FFFD
 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace actorlm::model
