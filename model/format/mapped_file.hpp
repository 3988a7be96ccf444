#pragma once
// A whole file mapped read-only (internal to the readers of this folder). Empty files map to
// {nullptr, 0}; failures are ModelFileErrors naming the path and the system's reason.

#include <cstddef>
#include <string>

namespace actorlm::model::detail {

struct Mapping {
  const std::byte* data = nullptr;
  std::size_t size = 0;
};

Mapping map_file(const std::string& path);
void unmap_file(Mapping m) noexcept;

}  // namespace actorlm::model::detail
