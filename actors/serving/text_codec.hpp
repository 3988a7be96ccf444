#pragma once
// Text <-> tokens for a served model, whatever the backend: the model's own tokenizer (cpu,
// cuda), or a synthetic one (sim: no weights and no tokenizer, so token counts are estimated
// and generated text is made-up words, labelled synthetic by the front end).

#include "model/tokenizer/chat_template.hpp"
#include "model/tokenizer/tokenizer.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::serving {

using model::Token;

// Streams one sample's tokens into text: whole UTF-8 characters only; special (control) tokens
// (end-of-turn...) produce no text unless asked (skip_special_tokens = false: their text as is,
// with no spaces around it, as vLLM's fast detokenizer gives for byte-level BPE vocabularies
// whatever spaces_between_special_tokens says).
class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  virtual std::string push(Token) = 0;
  virtual std::string flush() = 0;
};

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  // The messages rendered in the model's chat format. add_special_tokens: the tokenizer's own
  // special tokens (its BOS, when it adds one) in front as well, on top of what the template
  // writes (vLLM's chat API: false by default).
  virtual std::vector<Token> chat_prompt(const std::vector<model::ChatMessage>&, model::ChatOptions,
                                         bool add_special_tokens) const = 0;
  // The assistant's turn opened, nothing added.
  std::vector<Token> chat_prompt(const std::vector<model::ChatMessage>& m) const { return chat_prompt(m, {}, false); }
  // Plain text to complete; add_special_tokens: with the beginning-of-sequence token when the
  // model wants one (vLLM's completions default: true).
  virtual std::vector<Token> raw_prompt(std::string_view text, bool add_special_tokens) const = 0;
  std::vector<Token> raw_prompt(std::string_view text) const { return raw_prompt(text, true); }
  virtual std::unique_ptr<Detokenizer> detokenizer(bool skip_special_tokens) const = 0;
  std::unique_ptr<Detokenizer> detokenizer() const { return detokenizer(true); }
  // One token's text for logprobs (its bytes; may be a partial character).
  virtual std::string token_text(Token) const = 0;
  // The token as the vocabulary spells it (HF's convert_ids_to_tokens: byte-level pieces such as
  // "Ġcapital", valid UTF-8 even where the token's bytes are part of a character).
  virtual std::string token_piece(Token t) const { return token_text(t); }
  // Token ids a prompt may hold: [0, size()).
  virtual std::uint32_t size() const = 0;
  virtual bool synthetic() const { return false; }
};

// The model's tokenizer and chat format.
std::unique_ptr<TextCodec> make_tokenizer_codec(std::shared_ptr<const model::Tokenizer>, model::ChatFormat,
                                                std::string default_system);

// For the sim backend: about one token per 4 bytes of text (words split into 4-byte pieces,
// each hashed to an id below vocab_size), and generated ids shown as words of a fixed list.
std::unique_ptr<TextCodec> make_synthetic_codec(std::uint32_t vocab_size);

}  // namespace actorlm::serving
