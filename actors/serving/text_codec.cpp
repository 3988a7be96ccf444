#include "actors/serving/text_codec.hpp"

#include <array>

namespace actorlm::serving {

namespace {

class TokenizerDetokenizer final : public Detokenizer {
 public:
  TokenizerDetokenizer(const model::Tokenizer& t, bool skip_special) : tok_(t), detok_(t), skip_special_(skip_special) {}
  std::string push(Token t) override {
    // A model may pad its embeddings past the tokenizer: such ids have no text.
    if (t < 0 || static_cast<std::size_t>(t) >= tok_.size()) return {};
    // HF's skip_special_tokens skips the special added tokens (GGUF: control); user-defined
    // (non-special added) tokens are text.
    if (skip_special_ && tok_.is_control(t)) return {};
    return detok_.push(t);
  }
  std::string flush() override { return detok_.flush(); }

 private:
  const model::Tokenizer& tok_;
  model::IncrementalDetokenizer detok_;
  bool skip_special_;
};

class TokenizerCodec final : public TextCodec {
 public:
  TokenizerCodec(std::shared_ptr<const model::Tokenizer> t, model::ChatFormat f, std::string system)
      : owned_(std::move(t)), tok_(*owned_), format_(f), system_(std::move(system)) {}
  using TextCodec::chat_prompt;
  using TextCodec::detokenizer;
  using TextCodec::raw_prompt;
  std::vector<Token> chat_prompt(const std::vector<model::ChatMessage>& m, model::ChatOptions o,
                                 bool add_special_tokens) const override {
    std::vector<Token> out;
    add_special(add_special_tokens, out);
    const auto body = tok_.encode(model::render_chat(format_, m, o, system_), true);
    out.insert(out.end(), body.begin(), body.end());
    return out;
  }
  std::vector<Token> raw_prompt(std::string_view text, bool add_special_tokens) const override {
    std::vector<Token> out;
    add_special(add_special_tokens, out);
    const auto body = tok_.encode(text, false);
    out.insert(out.end(), body.begin(), body.end());
    return out;
  }
  std::unique_ptr<Detokenizer> detokenizer(bool skip_special_tokens) const override {
    return std::make_unique<TokenizerDetokenizer>(tok_, skip_special_tokens);
  }
  std::string token_text(Token t) const override {
    if (t < 0 || static_cast<std::size_t>(t) >= tok_.size()) return {};
    return std::string(tok_.token_bytes(t));
  }
  std::string token_piece(Token t) const override {
    const auto& pieces = tok_.vocabulary().tokens;
    if (t < 0 || static_cast<std::size_t>(t) >= pieces.size()) return {};
    return pieces[static_cast<std::size_t>(t)];
  }
  std::uint32_t size() const override { return static_cast<std::uint32_t>(tok_.size()); }

 private:
  // What HF's add_special_tokens adds for a byte-level BPE: the BOS, when the tokenizer adds one.
  void add_special(bool add, std::vector<Token>& out) const {
    const auto& v = tok_.vocabulary();
    if (add && v.add_bos && v.bos >= 0) out.push_back(v.bos);
  }

  std::shared_ptr<const model::Tokenizer> owned_;
  const model::Tokenizer& tok_;
  model::ChatFormat format_;
  std::string system_;
};

// Words shown for synthetic token ids (id modulo the list's length).
constexpr std::array<std::string_view, 32> kWords = {
    "the", "model", "of", "a", "simulated", "token", "stream", "and", "time", "is",
    "GPU", "batch", "cache", "to", "in", "request", "for", "step", "memory", "with",
    "block", "on", "latency", "rank", "that", "prefill", "decode", "as", "by", "queue",
    "page", "server"};

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

class SyntheticDetokenizer final : public Detokenizer {
 public:
  std::string push(Token t) override {
    return " " + std::string(kWords[static_cast<std::size_t>(t) % kWords.size()]);
  }
  std::string flush() override { return {}; }
};

class SyntheticCodec final : public TextCodec {
 public:
  explicit SyntheticCodec(std::uint32_t vocab) : vocab_(vocab) {}
  using TextCodec::chat_prompt;
  using TextCodec::detokenizer;
  using TextCodec::raw_prompt;
  // No BOS and no special tokens: add_special_tokens and skip_special_tokens change nothing.
  std::vector<Token> chat_prompt(const std::vector<model::ChatMessage>& m, model::ChatOptions o,
                                 bool) const override {
    std::vector<Token> out;
    for (const auto& msg : m) {
      out.push_back(id_of("<|" + msg.role + "|>"));  // one token per turn marker, as chat formats have
      encode(msg.content, out);
    }
    // Turns have no end marker here: continuing the last message only opens no new turn.
    if (o.add_generation_prompt && !(o.continue_final_message && !m.empty())) out.push_back(id_of("<|assistant|>"));
    return out;
  }
  std::vector<Token> raw_prompt(std::string_view text, bool) const override {
    std::vector<Token> out;
    encode(text, out);
    return out;
  }
  std::unique_ptr<Detokenizer> detokenizer(bool) const override {
    return std::make_unique<SyntheticDetokenizer>();
  }
  std::string token_text(Token t) const override { return SyntheticDetokenizer().push(t); }
  std::uint32_t size() const override { return vocab_; }
  bool synthetic() const override { return true; }

 private:
  Token id_of(std::string_view piece) const { return static_cast<Token>(fnv1a(piece) % vocab_); }
  // Whitespace-separated words, each cut into pieces of at most 4 bytes (BPE vocabularies of
  // 32k-128k tokens average about 4 bytes of English per token).
  void encode(std::string_view text, std::vector<Token>& out) const {
    std::size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
      std::size_t j = i;
      while (j < text.size() && text[j] != ' ' && text[j] != '\n' && text[j] != '\t') ++j;
      for (std::size_t k = i; k < j; k += 4) out.push_back(id_of(text.substr(k, std::min<std::size_t>(4, j - k))));
      i = j;
    }
  }
  std::uint32_t vocab_;
};

}  // namespace

std::unique_ptr<TextCodec> make_tokenizer_codec(std::shared_ptr<const model::Tokenizer> t, model::ChatFormat f,
                                                std::string default_system) {
  return std::make_unique<TokenizerCodec>(std::move(t), f, std::move(default_system));
}

std::unique_ptr<TextCodec> make_synthetic_codec(std::uint32_t vocab_size) {
  return std::make_unique<SyntheticCodec>(vocab_size);
}

}  // namespace actorlm::serving
