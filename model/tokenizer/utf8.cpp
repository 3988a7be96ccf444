#include "model/tokenizer/utf8.hpp"

namespace actorlm::model::utf8 {

Step next(std::string_view s, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return {Step::Kind::character, 1, lead};

  // Length and the allowed range of the second byte, which excludes overlong forms, surrogates
  // and code points above U+10FFFF (Table 3-7, Well-Formed UTF-8 Byte Sequences).
  std::size_t length = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  char32_t cp = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0F;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, cp = lead & 0x07;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {Step::Kind::invalid, 1};  // a continuation byte, C0, C1 or F5..FF
  }
  for (std::size_t i = 1; i < length; ++i) {
    if (pos + i >= s.size()) return {Step::Kind::incomplete, i};
    const unsigned char b = byte(pos + i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {Step::Kind::invalid, i};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Step::Kind::character, length, cp};
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t pos = 0; pos < s.size();) {
    const Step step = next(s, pos);
    if (step.kind == Step::Kind::character) {
      out.append(s.substr(pos, step.length));
    } else {
      out.append(replacement);
    }
    pos += step.length;
  }
  return out;
}

bool is_valid(std::string_view s) {
  for (std::size_t pos = 0; pos < s.size();) {
    const Step step = next(s, pos);
    if (step.kind != Step::Kind::character) return false;
    pos += step.length;
  }
  return true;
}

}  // namespace actorlm::model::utf8
