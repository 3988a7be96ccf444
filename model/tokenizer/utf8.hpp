#pragma once
// UTF-8 scanning for the tokenizer and detokenizer: one step at a time, telling a complete
// character from a sequence cut short by the end of the buffer and from bytes that can never
// start or continue a character. Invalid input is measured in "maximal subparts" (Unicode 15,
// section 3.9, U+FFFD substitution), the unit Python's errors="replace" uses.

#include <cstddef>
#include <string>
#include <string_view>

namespace actorlm::model::utf8 {

struct Step {
  enum class Kind { character, incomplete, invalid };
  Kind kind;
  std::size_t length;  // bytes: of the character, of the cut-short prefix, of the invalid subpart
  char32_t code_point = 0;  // for a character
};

// The step at s[pos] (pos < s.size()).
Step next(std::string_view s, std::size_t pos);

// Appends `cp` encoded as UTF-8.
void append(std::string& out, char32_t cp);

inline constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

// `s` with each invalid or incomplete subpart replaced by U+FFFD.
std::string sanitize(std::string_view s);

bool is_valid(std::string_view s);

}  // namespace actorlm::model::utf8
