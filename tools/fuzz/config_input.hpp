#pragma once
// What parse_config must do with any text, shared by the libFuzzer target (config_fuzzer.cpp) and
// the corpus replay test (tests/actors/config/config_fuzz_corpus_test.cpp): a valid config or a
// list of errors, never both and never neither; and a valid one printed by to_toml (what `actorlm
// config show` prints) parses back to the same config.

#include "actors/config/config.hpp"

#include <string>
#include <string_view>

namespace actorlm::fuzz {

// Empty when parse_config kept its contract on `text`; otherwise what it broke. An exception
// escaping is a finding too.
inline std::string config_property_violation(std::string_view text) {
  const config::ParseResult r = config::parse_config(text, "fuzz.toml");
  if (!r.ok()) {
    if (!(r.config == config::Config{})) return "errors, and a config that is not the default";
    for (const config::ConfigError& e : r.errors) {
      if (e.message.empty()) return "an error without a message";
      if (e.to_string().empty()) return "an error that prints as nothing";
    }
    return "";
  }
  const std::string shown = config::to_toml(r.config);
  const config::ParseResult again = config::parse_config(shown, "shown.toml");
  if (!again.ok()) return "to_toml printed a config that does not parse: " + again.errors.front().to_string();
  if (!(again.config == r.config)) return "to_toml printed a config that parses to another";
  return "";
}

}  // namespace actorlm::fuzz
