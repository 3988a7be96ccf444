#pragma once
// What the fuzz-corpus replay tests share: a corpus folder's files in a fixed order, a file's
// bytes, the ACTORLM_FUZZ_ITERATIONS override of how many generated inputs a test runs, and
// a path printed by its file name so that a failing BOOST_DATA_TEST_CASE names its file.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

namespace actorlm::testing {

// The regular files of `dir` whose names start with `prefix`, sorted.
inline std::vector<std::filesystem::path> corpus_files(const std::filesystem::path& dir, const std::string& prefix = "") {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline int fuzz_iterations(int by_default) {
  const char* s = std::getenv("ACTORLM_FUZZ_ITERATIONS");
  return s != nullptr ? std::atoi(s) : by_default;
}

}  // namespace actorlm::testing

namespace std::filesystem {  // found by argument-dependent lookup from Boost.Test's printer
inline std::ostream& boost_test_print_type(std::ostream& o, const path& p) { return o << p.filename().string(); }
}  // namespace std::filesystem
