#include "model/format/gguf_types.hpp"

#include <array>

namespace actorlm::model::detail {

std::optional<DType> dtype_of_ggml_type(std::uint32_t id) {
  switch (id) {
    case 0: return DType::f32;
    case 1: return DType::f16;
    case 2: return DType::q4_0;
    case 3: return DType::q4_1;
    case 8: return DType::q8_0;
    case 30: return DType::bf16;
    default: return std::nullopt;
  }
}

std::string_view ggml_type_name(std::uint32_t id) {
  // ggml.h enum ggml_type; ids 4, 5, 31-33 and 36-38 were removed from ggml and stay unnamed.
  static constexpr std::array<std::string_view, 42> names = {
      "F32",    "F16",   "Q4_0",   "Q4_1",    "",       "",       "Q5_0",   "Q5_1",  "Q8_0",
      "Q8_1",   "Q2_K",  "Q3_K",   "Q4_K",    "Q5_K",   "Q6_K",   "Q8_K",   "IQ2_XXS",
      "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",  "IQ3_S",  "IQ2_S",  "IQ4_XS", "I8",    "I16",
      "I32",    "I64",   "F64",    "IQ1_M",   "BF16",   "",       "",       "",      "TQ1_0",
      "TQ2_0",  "",      "",       "",        "MXFP4",  "NVFP4",  "Q1_0"};
  return id < names.size() ? names[id] : std::string_view{};
}

std::string_view gguf_value_type_name(GgufValue::Type t) {
  using T = GgufValue::Type;
  switch (t) {
    case T::u8: return "u8";
    case T::i8: return "i8";
    case T::u16: return "u16";
    case T::i16: return "i16";
    case T::u32: return "u32";
    case T::i32: return "i32";
    case T::f32: return "f32";
    case T::boolean: return "bool";
    case T::string: return "string";
    case T::array: return "array";
    case T::u64: return "u64";
    case T::i64: return "i64";
    case T::f64: return "f64";
  }
  return "unknown";
}

}  // namespace actorlm::model::detail
