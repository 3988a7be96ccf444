#pragma once
// "[576, 49152]": how the readers' messages print a shape (internal to this folder).

#include <cstdint>
#include <span>
#include <string>

namespace actorlm::model::detail {

inline std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace actorlm::model::detail
