#include "model/format/mapped_file.hpp"

#include "model/format/tensor_source.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace actorlm::model::detail {

namespace {

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  throw ModelFileError(path + ": " + what + ": " + std::strerror(err));
}

// Closes the descriptor on every path out of map_file; the mapping outlives it.
struct Fd {
  int fd;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

}  // namespace

Mapping map_file(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) throw ModelFileError(path + ": not a regular file");
  Mapping m;
  m.size = static_cast<std::size_t>(st.st_size);
  if (m.size == 0) return m;
  void* p = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, f.fd, 0);
  if (p == MAP_FAILED) fail(path, "cannot map", errno);
  m.data = static_cast<const std::byte*>(p);
  return m;
}

void unmap_file(Mapping m) noexcept {
  if (m.data != nullptr) ::munmap(const_cast<std::byte*>(m.data), m.size);
}

}  // namespace actorlm::model::detail
