#pragma once
// Internal to actorlm_config: how values are spelled, shared by to_toml and the error messages so
// that "found ..." shows a value the way the user would write it. Defined in config_toml.cpp.

#include <string>
#include <string_view>

namespace actorlm::config::detail {

// A TOML basic string: quotes added, `"`, `\` and control characters escaped.
std::string quoted(std::string_view text);

// The shortest decimal that reads back as the same double ("0.9", "4", "1e+20").
std::string shortest(double value);

// Like shortest, but always a TOML float ("4.0", not "4"); "inf", "-inf", "nan" for the rest.
std::string toml_float(double value);

}  // namespace actorlm::config::detail
