// PromptBuilder (see prompt_builder.hpp).
#include "tools/bench/prompt_builder.hpp"

#include "model/format/gguf_file.hpp"
#include "model/tokenizer/tokenizer.hpp"

#include <array>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace actorlm::bench {

namespace {

// Short common words, 2-4 bytes: one synthetic-codec token each, and mostly one BPE token.
constexpr std::array<std::string_view, 48> kShortWords = {
    "the", "of", "and", "to", "in", "is", "for", "on", "as", "by", "with", "that", "at", "from",
    "it", "an", "be", "are", "was", "this", "or", "not", "but", "have", "they", "his", "her", "one",
    "all", "can", "more", "will", "time", "when", "we", "our", "been", "has", "if", "so", "out",
    "new", "use", "any", "way", "day", "man", "old"};

bool is_plain_word(std::string_view bytes) {
  if (bytes.size() < 3 || bytes.size() > 9 || bytes[0] != ' ') return false;
  for (char c : bytes.substr(1))
    if (c < 'a' || c > 'z') return false;
  return true;
}

}  // namespace

struct PromptBuilder::Impl {
  std::shared_ptr<const model::Tokenizer> tokenizer;
  std::vector<std::string> words;  // with a tokenizer: " word" pieces, one token each
  std::mt19937_64 rng;
  bool bos = false;

  std::string_view draw() {
    if (!tokenizer) return kShortWords[rng() % kShortWords.size()];
    return words[rng() % words.size()];
  }
  std::size_t count(const std::string& text) const {
    return tokenizer->encode(text, false).size() + (bos ? 1 : 0);
  }
};

PromptBuilder::PromptBuilder(std::uint64_t seed) : impl_(std::make_unique<Impl>()) { impl_->rng.seed(seed); }

PromptBuilder::PromptBuilder(std::shared_ptr<const model::Tokenizer> tokenizer, std::uint64_t seed)
    : impl_(std::make_unique<Impl>()) {
  impl_->rng.seed(seed);
  impl_->bos = tokenizer->vocabulary().add_bos && tokenizer->vocabulary().bos >= 0;
  for (model::Token t = 0; t < static_cast<model::Token>(tokenizer->size()); ++t) {
    if (tokenizer->is_special(t)) continue;
    const auto bytes = tokenizer->token_bytes(t);
    if (!is_plain_word(bytes)) continue;
    const auto ids = tokenizer->encode(bytes, false);
    if (ids.size() == 1 && ids[0] == t) impl_->words.emplace_back(bytes);
  }
  if (impl_->words.size() < 64)
    throw std::invalid_argument("the tokenizer has " + std::to_string(impl_->words.size()) +
                                " plain word tokens (\" word\"); at least 64 are needed to build prompts");
  impl_->tokenizer = std::move(tokenizer);
}

PromptBuilder::~PromptBuilder() = default;
PromptBuilder::PromptBuilder(PromptBuilder&&) noexcept = default;
PromptBuilder& PromptBuilder::operator=(PromptBuilder&&) noexcept = default;

bool PromptBuilder::exact() const { return impl_->tokenizer != nullptr; }

std::optional<std::size_t> PromptBuilder::count(const std::string& text) const {
  if (!impl_->tokenizer) return std::nullopt;
  return impl_->count(text);
}

std::string PromptBuilder::build(std::uint32_t tokens) {
  if (tokens == 0) tokens = 1;
  auto& d = *impl_;
  if (!d.tokenizer) {
    std::string text;
    for (std::uint32_t i = 0; i < tokens; ++i) {
      if (i > 0) text += ' ';
      text += d.draw();
    }
    return text;
  }
  // The BOS counts as one; a 1-token prompt with a BOS is the BOS and one word anyway.
  const std::size_t target = tokens;
  std::vector<std::string_view> words;
  const std::size_t first = target > (d.bos ? 1u : 0u) ? target - (d.bos ? 1 : 0) : 1;
  for (std::size_t i = 0; i < first; ++i) words.push_back(d.draw());
  auto join = [&] {
    std::string text;
    for (auto w : words) text += w;
    // A leading space is a token of its own in some vocabularies; it is part of the first word.
    return text;
  };
  for (int round = 0; round < 64; ++round) {
    const std::string text = join();
    const std::size_t n = d.count(text);
    if (n == target) return text;
    if (n > target && words.size() > 1) {
      words.resize(words.size() - std::min(words.size() - 1, n - target));
    } else if (n < target) {
      for (std::size_t i = n; i < target; ++i) words.push_back(d.draw());
    } else {
      words.back() = d.draw();  // one word that is still too long: another one
    }
  }
  throw std::runtime_error("no prompt of exactly " + std::to_string(tokens) + " tokens found in 64 rounds");
}

std::shared_ptr<const model::Tokenizer> load_tokenizer_file(const std::string& path) {
  const bool gguf = path.size() >= 5 && path.substr(path.size() - 5) == ".gguf";
  model::Vocabulary vocab = gguf ? model::vocabulary_from_gguf(*model::GgufFile::open(path))
                                 : model::vocabulary_from_tokenizer_json(path);
  return std::make_shared<const model::Tokenizer>(std::move(vocab));
}

}  // namespace actorlm::bench
