#include "actors/http/json_guard.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <unordered_set>
#include <vector>

namespace actorlm::http {

namespace {

using nlohmann::json;

// The UTF-8 sequence that starts at s[i]: its length when valid, 0 when invalid, kCut when it is
// valid so far but s ends before it does. RFC 3629 section 4: no overlong forms (C0, C1, E0 80..9F,
// F0 80..8F), no surrogates (ED A0..BF), nothing past U+10FFFF (F4 90.., F5..FF).
constexpr std::size_t kCut = ~std::size_t{0};
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range; later bytes are always 80..BF
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (std::size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return kCut;
    if (byte(i + k) < (k == 1 ? lo : 0x80) || byte(i + k) > (k == 1 ? hi : 0xBF)) return 0;
  }
  return n;
}

std::size_t utf8_length(std::string_view s, std::size_t i) {
  const std::size_t n = utf8_sequence(s, i);
  return n == kCut ? 0 : n;
}

// Offset of the first byte of s that starts no valid UTF-8 sequence; s.size() when all is valid.
std::size_t first_invalid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

std::string hex_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", c);
  return buf;
}

// The streaming checks, one SAX handler over nlohmann's lexer. It keeps one frame per open array
// or object, enough to name the field being read when something is wrong.
class Guard {
 public:
  Guard(std::string_view body, const JsonLimits& limits) : body_(body), limits_(limits) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t x, const std::string& literal);
  bool string(std::string&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(true); }
  bool key(std::string& name);
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(false); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& e);

  std::optional<ApiError> error;

 private:
  struct Frame {
    bool object = false;
    std::size_t index = 0;  // arrays: the element being read
    bool has_key = false;   // objects: a key was read and its value is being read
    std::string key;
    std::unordered_set<std::string> keys;  // objects: every key so far
  };

  bool value();
  bool open(bool object);
  bool close();
  bool refuse(const std::string& param, const std::string& why);
  std::string path() const;
  std::optional<std::string> key_with_bad_byte(std::size_t position, const std::string& last_token) const;
  void refuse_utf8(std::size_t bad, std::size_t position, const std::string& last_token);

  std::string_view body_;
  JsonLimits limits_;
  std::vector<Frame> frames_;
};

// The field being read: "messages[0].content", "stop[2]"; "body" at the top.
std::string Guard::path() const {
  std::string p;
  for (const Frame& f : frames_) {
    if (f.object) {
      if (!f.has_key) break;  // only the innermost frame can be between keys
      if (!p.empty()) p += '.';
      p += quote_safely(f.key, 64);
    } else {
      p += "[" + std::to_string(f.index) + "]";
    }
  }
  return p.empty() || p[0] == '[' ? "body" + p : p;
}

bool Guard::refuse(const std::string& param, const std::string& why) {
  error = bad_field(param, param + ": " + why);
  return false;
}

bool Guard::value() {
  if (frames_.empty()) return true;
  Frame& f = frames_.back();
  if (f.object) f.has_key = false;
  else ++f.index;
  return true;
}

bool Guard::open(bool object) {
  if (frames_.size() >= limits_.max_depth)
    return refuse(path(), "nested more than " + std::to_string(limits_.max_depth) + " arrays and objects deep");
  frames_.push_back(Frame{object});
  return true;
}

bool Guard::close() {
  frames_.pop_back();
  return value();
}

bool Guard::key(std::string& name) {
  Frame& f = frames_.back();
  f.key = name;
  f.has_key = true;
  if (!f.keys.insert(name).second) return refuse(path(), "duplicate key; give each field once");
  return true;
}

bool Guard::number_float(json::number_float_t x, const std::string& literal) {
  // The lexer reads an integer literal as a double only when it does not fit in 64 bits.
  if (literal.find_first_of(".eE") == std::string::npos)
    return refuse(path(), quote_safely(literal, 40) + " is out of range (integers must be in [-2^63, 2^64))");
  if (!std::isfinite(x)) return refuse(path(), quote_safely(literal, 40) + " is out of range for a number");
  return value();
}

// When the lexer stopped inside a key string: that key's bytes, from after its opening quote to
// its closing one (or the end of the body). nullopt when it stopped elsewhere.
std::optional<std::string> Guard::key_with_bad_byte(std::size_t position, const std::string& last_token) const {
  // The token (what the lexer read since the token began) ends at `position`.
  if (last_token.empty() || last_token[0] != '"' || position < last_token.size() || position > body_.size())
    return std::nullopt;
  const std::size_t start = position - last_token.size();
  if (body_.substr(start, last_token.size()) != last_token) return std::nullopt;
  for (std::size_t i = 1; i < last_token.size(); ++i) {
    if (last_token[i] == '\\') ++i;
    else if (last_token[i] == '"') return std::nullopt;  // the string ended: not inside one
  }
  std::size_t end = start + 1;
  for (; end < body_.size() && end < start + 256 && body_[end] != '"'; ++end)
    if (body_[end] == '\\') ++end;
  return std::string(body_.substr(start + 1, std::min(end, body_.size()) - start - 1));
}

void Guard::refuse_utf8(std::size_t bad, std::size_t position, const std::string& last_token) {
  const std::string where = " (byte " + hex_byte(static_cast<unsigned char>(body_[bad])) + " at offset " +
                            std::to_string(bad) + " of the body)";
  const bool between_keys = !frames_.empty() && frames_.back().object && !frames_.back().has_key;
  if (!between_keys) {
    refuse(path(), "not valid UTF-8" + where);
    return;
  }
  const std::string object = path();
  if (const auto name = key_with_bad_byte(position, last_token)) {
    const std::string key = quote_safely(*name, 64);
    refuse(object == "body" ? key : object + "." + key, "the key is not valid UTF-8" + where);
  } else {
    refuse(object, "not valid UTF-8 where a key was expected" + where);
  }
}

bool Guard::parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& e) {
  if (e.id == 406) {  // out_of_range.406: a number literal beyond a double's range
    refuse(path(), quote_safely(last_token, 40) + " is out of range for a number");
    return false;
  }
  // The lexer stops at the first byte that does not fit, so a bad byte in what it read is why.
  const std::string_view read = body_.substr(0, std::min(position, body_.size()));
  const std::size_t bad = first_invalid_utf8(read);
  // A body cut inside a character is cut short, not badly encoded.
  const bool body_ends_inside_a_character = position > body_.size() && bad < read.size() && utf8_sequence(read, bad) == kCut;
  if (bad < read.size() && !body_ends_inside_a_character) {
    refuse_utf8(bad, position, last_token);
    return false;
  }
  const std::string at = path();
  error = ApiError{400, "the body is not valid JSON: " + quote_safely(e.what(), 300) + (at == "body" ? "" : " (in " + at + ")"),
                   "invalid_request_error", "", "invalid_json"};
  return false;
}

}  // namespace

std::string quote_safely(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_length(text, i);
    const std::string piece = n == 0 ? "\\x" + hex_byte(static_cast<unsigned char>(text[i])).substr(2)
                                     : std::string(text.substr(i, n));
    if (out.size() + piece.size() > max_bytes) return out + "...";
    out += piece;
    i += std::max<std::size_t>(n, 1);
  }
  return out;
}

std::optional<ApiError> check_json_body(std::string_view body, const JsonLimits& limits) {
  Guard guard(body, limits);
  if (json::sax_parse(body, &guard)) return std::nullopt;
  if (guard.error) return guard.error;
  return ApiError{400, "the body is not valid JSON", "invalid_request_error", "", "invalid_json"};
}

}  // namespace actorlm::http
