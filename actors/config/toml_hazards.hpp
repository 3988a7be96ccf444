#pragma once
// Text that Debian's toml++ 3.3.0 must not be given: where its parser asks whether a non-ASCII
// character is whitespace, a lookup table has holes (U+00A1..U+0499, U+2D6E..U+3167) that end
// in TOML_UNREACHABLE, undefined behaviour in the release library (marzer/tomlplusplus#190,
// #295; fixed upstream after 3.3.0). It asks outside strings and comments, and inside a
// multi-line basic string right after a backslash. Found by tools/fuzz/config_fuzzer.cpp.
//
// find_toml_hazard scans for those places before toml::parse is called: a non-ASCII character
// outside strings and comments (never valid TOML, so nothing valid is refused), or one of the
// hole's characters first after a backslash in a """string""" (valid TOML that toml++ cannot
// read safely; \uXXXX reads the same).

#include "actors/config/table_reader.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace actorlm::config::detail {

struct TomlHazard {
  Position where;
  std::string message;
};

std::optional<TomlHazard> find_toml_hazard(std::string_view toml_text);

}  // namespace actorlm::config::detail
