#pragma once
// Test-only: the goldens of fixtures/dequant.json (written by tools/models/make_dequant_fixture.py
// with the gguf Python package): per dtype, raw stored bytes and the floats ggml's reference
// dequantizer gives for them.

#include "model/format/tensor_source.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace actorlm::model::test {

struct DequantCase {
  std::string name;
  std::vector<std::byte> bytes;
  std::vector<float> expected;
};

inline std::vector<std::byte> from_hex(const std::string& hex) {
  std::vector<std::byte> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::byte>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

// dtype key in the fixture ("q8_0") -> its cases.
inline std::map<std::string, std::vector<DequantCase>> load_dequant_fixture() {
  std::ifstream in(ACTORLM_FORMAT_FIXTURES "/dequant.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto doc = nlohmann::json::parse(text.str());
  std::map<std::string, std::vector<DequantCase>> out;
  for (const auto& [dtype, cases] : doc.at("cases").items()) {
    for (const auto& c : cases) {
      DequantCase d;
      d.name = c.at("name").get<std::string>();
      d.bytes = from_hex(c.at("bytes").get<std::string>());
      const auto f = from_hex(c.at("expected").get<std::string>());
      d.expected.resize(f.size() / 4);
      std::memcpy(d.expected.data(), f.data(), f.size());
      out[dtype].push_back(std::move(d));
    }
  }
  return out;
}

// Bit-identical, or both NaN (NaN payloads may be quieted differently by numpy).
inline bool same_float(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

}  // namespace actorlm::model::test
