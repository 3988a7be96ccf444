// libFuzzer target: parse_request over both endpoints, on raw bodies and on bodies built from
// the request's structure (tools/fuzz/request_input.hpp says how an input's bytes are read).
// A finding: an exception escaping, a sanitizer report, or a broken property (abort).
#include "tools/fuzz/request_input.hpp"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = actorlm::fuzz::request_input(data, size);
  const std::string wrong = actorlm::fuzz::request_property_violation(input.endpoint, input.body);
  if (!wrong.empty()) {
    std::fprintf(stderr, "request parser: %s\n", wrong.c_str());
    std::abort();
  }
  return 0;
}
