#pragma once
// GPT-2's byte-level alphabet (openai/gpt-2 encoder.py bytes_to_unicode): each of the 256 byte
// values is spelled as one printable code point, so a vocabulary of strings covers arbitrary
// bytes. Printable Latin-1 bytes (! .. ~, ¡ .. ¬, ® .. ÿ) stand for themselves; the other 68 map,
// in byte order, to U+0100 .. U+0143 (space is U+0120 'Ġ', newline U+010A 'Ċ').

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace actorlm::model::byte_level {

// The code point spelling `byte`.
char32_t code_point_of(unsigned char byte);

// The UTF-8 text spelling each byte: [256].
const std::array<std::string, 256>& spellings();

// The byte a code point spells, if it is one of the alphabet's 256.
std::optional<unsigned char> byte_of(char32_t cp);

// Raw bytes -> their spelling.
std::string encode(std::string_view bytes);

// A token's spelling -> its raw bytes; std::nullopt when some code point is outside the alphabet
// (or the text is not UTF-8), so the caller can fall back to the text itself.
std::optional<std::string> decode(std::string_view spelled);

}  // namespace actorlm::model::byte_level
