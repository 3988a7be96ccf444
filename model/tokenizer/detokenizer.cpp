// IncrementalDetokenizer (declared in tokenizer.hpp): holds back only the bytes of a character
// that later tokens may still complete.

#include "model/tokenizer/tokenizer.hpp"
#include "model/tokenizer/utf8.hpp"

namespace actorlm::model {

std::string IncrementalDetokenizer::push(Token t) {
  pending_ += tokenizer_->token_bytes(t);
  std::string out;
  std::size_t pos = 0;
  while (pos < pending_.size()) {
    const utf8::Step step = utf8::next(pending_, pos);
    if (step.kind == utf8::Step::Kind::incomplete) break;  // wait for the next token
    if (step.kind == utf8::Step::Kind::character) {
      out.append(pending_, pos, step.length);
    } else {
      out.append(utf8::replacement);
    }
    pos += step.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace actorlm::model
