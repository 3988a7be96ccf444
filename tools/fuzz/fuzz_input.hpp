#pragma once
// One libFuzzer input as a file the readers can open by path: an in-memory file (memfd) reached
// as /proc/self/fd/N, rewritten for every input, so no disk traffic per run. `exercise` opens
// it and reads every tensor; a ModelFileError is the expected failure, anything else (another
// exception, a crash, a sanitizer report) is a finding.

#include "model/format/tensor_source.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

namespace actorlm::fuzz {

inline const std::string& as_file(const std::uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("actorlm_fuzz", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) std::abort();
  if (size > 0 && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  return path;
}

template <class Open>
void exercise(Open open, const std::uint8_t* data, std::size_t size) {
  try {
    const auto src = open(as_file(data, size));
    for (const model::TensorInfo& t : src->tensors()) src->read_f32(t.name, t.shape);
  } catch (const model::ModelFileError&) {
  }
}

}  // namespace actorlm::fuzz
