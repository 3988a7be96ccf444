#include "model/format/tensor_source.hpp"

#include "model/format/shape_text.hpp"

#include <algorithm>
#include <limits>

namespace actorlm::model {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::q8_0: return "Q8_0";
    case DType::q4_0: return "Q4_0";
    case DType::q4_1: return "Q4_1";
  }
  return "unknown";
}

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) {
      throw ModelFileError("tensor '" + name + "': negative dimension in shape " +
                           detail::shape_text(shape));
    }
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) {
      throw ModelFileError("tensor '" + name + "': shape " + detail::shape_text(shape) +
                           " has more than 2^63 elements");
    }
    n *= d;
  }
  return n;
}

const TensorInfo* TensorSource::find(std::string_view name) const {
  const auto& all = tensors();
  const auto it = std::find_if(all.begin(), all.end(),
                               [&](const TensorInfo& t) { return t.name == name; });
  return it == all.end() ? nullptr : &*it;
}

const TensorInfo& TensorSource::checked(std::string_view name,
                                       std::span<const std::int64_t> expected_shape) const {
  const TensorInfo* info = find(name);
  if (info == nullptr) {
    throw ModelFileError(path() + ": no tensor named '" + std::string(name) + "'");
  }
  if (!expected_shape.empty() &&
      !std::equal(info->shape.begin(), info->shape.end(), expected_shape.begin(),
                  expected_shape.end())) {
    throw ModelFileError(path() + ": tensor '" + info->name + "' has shape " +
                         detail::shape_text(info->shape) + ", expected " +
                         detail::shape_text(expected_shape));
  }
  return *info;
}

std::vector<float> TensorSource::read_f32(std::string_view name,
                                          std::span<const std::int64_t> expected_shape) const {
  const TensorInfo& info = checked(name, expected_shape);
  std::vector<float> out(static_cast<std::size_t>(info.numel()));
  read_into(info, out);
  return out;
}

TensorSource::Stored TensorSource::read_stored(std::string_view name,
                                               std::span<const std::int64_t> expected_shape) const {
  const TensorInfo& info = checked(name, expected_shape);
  return {&info, stored_bytes(info)};
}

}  // namespace actorlm::model
