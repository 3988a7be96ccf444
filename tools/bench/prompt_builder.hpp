#pragma once
// Prompts of a given token length for `actorlm bench client`.
//
// With the served model's tokenizer (GGUF or tokenizer.json): the text is a run of random
// "words", each a vocabulary token spelled as a space and 2-8 ASCII letters that encodes to
// itself alone, so that the pre-tokenizer splits the text at every word and each word is one
// token; the text is then re-encoded and, should a pair of words have merged, words are added
// or removed until the count is exact (a few rounds at most). A tokenizer that adds a BOS
// (add_bos) makes the server count one more token, so the text is built one token shorter.
// Without a tokenizer: N words of 2-4 lowercase letters, one token each for the sim backend's
// synthetic codec (at most 4 bytes per token) and about one token each for a BPE vocabulary:
// lengths are then approximate.
//
// Prompts differ from one request to the next (a seeded generator), so a server's prefix cache
// does not shorten their prefill.

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>

namespace actorlm::model { class Tokenizer; }

namespace actorlm::bench {

class PromptBuilder {
 public:
  // Approximate lengths (no tokenizer).
  explicit PromptBuilder(std::uint64_t seed);
  // Exact lengths with `tokenizer`. Throws std::invalid_argument when its vocabulary has too few
  // plain word tokens (under 64) to draw from.
  PromptBuilder(std::shared_ptr<const model::Tokenizer> tokenizer, std::uint64_t seed);
  ~PromptBuilder();
  PromptBuilder(PromptBuilder&&) noexcept;
  PromptBuilder& operator=(PromptBuilder&&) noexcept;

  bool exact() const;
  // A prompt the server counts as `tokens` tokens (>= 1): exactly with a tokenizer, else about.
  // Throws std::runtime_error if no exact text is found (does not happen with BPE vocabularies
  // in practice: the loop is bounded).
  std::string build(std::uint32_t tokens);
  // Tokens the tokenizer counts in `text` as the server would (BOS included); nullopt without one.
  std::optional<std::size_t> count(const std::string& text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Loads a tokenizer from a .gguf file's metadata or a tokenizer.json. Throws on a bad file
// (std::exception with a message naming it).
std::shared_ptr<const model::Tokenizer> load_tokenizer_file(const std::string& path);

}  // namespace actorlm::bench
