#include "model/tokenizer/byte_level.hpp"

#include "model/tokenizer/utf8.hpp"

namespace actorlm::model::byte_level {

namespace {

bool stands_for_itself(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> code_point{};  // [256] byte -> code point
  std::array<std::string, 256> spelling;   // [256] byte -> UTF-8 of its code point
  std::array<int, 0x144> byte{};           // [U+0000 .. U+0143] code point -> byte, -1 if none

  Tables() {
    byte.fill(-1);
    char32_t next_extra = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      code_point[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next_extra++;
      byte[code_point[b]] = static_cast<int>(b);
      utf8::append(spelling[b], code_point[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t code_point_of(unsigned char byte) { return tables().code_point[byte]; }

const std::array<std::string, 256>& spellings() { return tables().spelling; }

std::optional<unsigned char> byte_of(char32_t cp) {
  if (cp >= tables().byte.size() || tables().byte[cp] < 0) return std::nullopt;
  return static_cast<unsigned char>(tables().byte[cp]);
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += tables().spelling[static_cast<unsigned char>(c)];
  return out;
}

std::optional<std::string> decode(std::string_view spelled) {
  std::string out;
  out.reserve(spelled.size());
  for (std::size_t pos = 0; pos < spelled.size();) {
    const utf8::Step step = utf8::next(spelled, pos);
    if (step.kind != utf8::Step::Kind::character) return std::nullopt;
    const auto b = byte_of(step.code_point);
    if (!b) return std::nullopt;
    out += static_cast<char>(*b);
    pos += step.length;
  }
  return out;
}

}  // namespace actorlm::model::byte_level
