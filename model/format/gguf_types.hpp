#pragma once
// ggml's tensor type ids as stored in GGUF tensor infos, and GGUF value type names (internal to
// this folder, shared by the reader and its messages).

#include "model/format/gguf_file.hpp"

#include <optional>
#include <string_view>

namespace actorlm::model::detail {

// The DType of ggml type `id` when this reader supports it.
std::optional<DType> dtype_of_ggml_type(std::uint32_t id);
// ggml's name for type `id` ("Q4_K"), empty when the id is unknown.
std::string_view ggml_type_name(std::uint32_t id);
// "u32", "string", "array", ... ; "unknown" outside the enum.
std::string_view gguf_value_type_name(GgufValue::Type t);

}  // namespace actorlm::model::detail
