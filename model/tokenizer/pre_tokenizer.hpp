#pragma once
// The split before BPE: a list of regexes (PCRE2, UTF + Unicode properties) applied in turn, each
// to every piece the previous one left; a match and the text between matches both become pieces
// (HF tokenizers' Split "isolated" behaviour, llama.cpp's unicode_regex_split). Each type
// reproduces the pre_tokenizer of the model family's tokenizer.json (the regexes are also
// llama.cpp's, src/llama-vocab.cpp):
//   gpt2       GPT-2's regex                        ByteLevel(use_regex)
//   smollm     each \p{N} alone, then GPT-2's       Sequence[Digits(individual), ByteLevel]
//   llama-bpe  Llama 3's regex                      Sequence[Split(regex), ByteLevel(no regex)]
//   falcon     punctuation runs, GPT-2's, then      Sequence[Punctuation, ByteLevel, Digits,
//              digit runs and 3-digit groups of      Split("[0-9][0-9][0-9]")]
//              the byte-level spelling
// (llama.cpp's falcon list applies the digit steps to the text, not its spelling, and so differs
// from HF on " 12" and on "½"; HF is followed here.) Aliases llama.cpp treats alike are accepted
// (gpt-2, starcoder, llama3, ...). `\s` means what Oniguruma's does in HF tokenizers
// ([\t-\r\x{85}\p{Z}]), whatever the PCRE2 version.
// Text that is not valid UTF-8 is split too: invalid bytes match no class and end up in pieces
// of their own (PCRE2_MATCH_INVALID_UTF).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::model {

class PreTokenizer {
 public:
  // Throws std::invalid_argument naming the known types when `name` is none of them.
  explicit PreTokenizer(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // The pieces of `text` in order, together exactly `text`, none empty: [n_pieces] views into it.
  // A piece may end inside a UTF-8 character only for falcon (see above).
  // Thread-safe. Throws std::runtime_error if PCRE2 gives up (it should not on these patterns).
  std::vector<std::string_view> split(std::string_view text) const;

  static bool is_known(std::string_view name);
  // Llama 3's split regex, as its tokenizer.json writes it (to recognise that pre_tokenizer).
  static constexpr std::string_view llama3_regex =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
      R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  // The canonical name of a known type or alias ("llama3" -> "llama-bpe").
  static std::string_view canonical(std::string_view name);

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace actorlm::model
