#pragma once
// toml::parse, kept away from undefined behaviour in Debian's toml++ 3.3.0. Where its parser asks
// whether a non-ASCII character is whitespace, a generated lookup has holes (U+00A1..U+0499,
// U+2C5E..U+3057, U+FB26..U+FEFE: Latin-1 letters, Cyrillic, Greek...) that end in
// TOML_UNREACHABLE, __builtin_unreachable in the g++-built library (marzer/tomlplusplus#190,
// #295; fixed upstream after 3.3.0). It asks outside strings and comments (in keys, after bare
// values) and in a multi-line basic string right after a backslash. Found by
// tools/fuzz/config_fuzzer.cpp.
//
// parse_toml gives what toml::parse gives, the same table or the same parse_error, without that:
//   - text with no hole character goes to toml::parse as it is (nearly every file);
//   - otherwise each hole character is first replaced by a harmless one of the same length, which
//     toml++ treats alike except for the lookup (not whitespace, as the upstream fix answers).
//     Invalid TOML gets that parse's error (its message quoting the original character);
//   - valid TOML holds hole characters only in strings and comments, where toml++ asks only after
//     a backslash in a """string""": one there is an error (\uXXXX writes the same character);
//     otherwise the original text is parsed.

#include <toml++/toml.h>

#include <string_view>

namespace actorlm::config::detail {

toml::table parse_toml(std::string_view text, std::string_view file);

}  // namespace actorlm::config::detail
