// libFuzzer target: parse_config (what `actorlm config check` runs) on arbitrary text, and the
// round trip of what it accepts through to_toml (tools/fuzz/config_input.hpp).
#include "tools/fuzz/config_input.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string wrong =
      actorlm::fuzz::config_property_violation(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!wrong.empty()) {
    std::fprintf(stderr, "config parser: %s\n", wrong.c_str());
    std::abort();
  }
  return 0;
}
