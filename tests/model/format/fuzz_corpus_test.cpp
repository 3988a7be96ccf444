// Robustness: every file of the regression corpus (corpus/gguf, corpus/safetensors: valid seeds
// and inputs that once broke a reader) and thousands of deterministic mutations of the seeds
// (byte flips, cuts, large integers written over header fields, digits swapped in JSON headers)
// either open and read completely or fail with a ModelFileError; nothing else may escape.
// ACTORLM_FUZZ_ITERATIONS sets the mutations per seed (default 1500).
#define BOOST_TEST_MODULE model_format_fuzz_corpus
#include "model/format/gguf_file.hpp"
#include "model/format/safetensors_file.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <sys/mman.h>
#include <unistd.h>

using namespace actorlm::model;
namespace data = boost::unit_test::data;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<std::uint8_t>;
enum class Kind { gguf, safetensors };

Bytes read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// An in-memory file the readers open by path (/proc/self/fd/N): no disk traffic per input.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("actorlm_fuzz", MFD_CLOEXEC)) {
    BOOST_TEST_REQUIRE(fd_ >= 0);
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  const std::string& set(const Bytes& b) {
    BOOST_TEST_REQUIRE(::ftruncate(fd_, 0) == 0);
    if (!b.empty())
      BOOST_TEST_REQUIRE(::pwrite(fd_, b.data(), b.size(), 0) == static_cast<ssize_t>(b.size()));
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

// Opens and reads every tensor. true: opened; false: a ModelFileError. Anything else escapes.
bool exercise(Kind kind, const std::string& path) {
  try {
    std::unique_ptr<TensorSource> src;
    if (kind == Kind::gguf) {
      src = GgufFile::open(path);
    } else {
      src = SafetensorsFile::open(path);
    }
    for (const TensorInfo& t : src->tensors()) {
      const std::vector<float> v = src->read_f32(t.name, t.shape);
      if (v.size() != static_cast<std::size_t>(t.numel())) throw std::logic_error("wrong size");
    }
    return true;
  } catch (const ModelFileError&) {
    return false;
  }
}

struct CorpusFile {
  Kind kind;
  fs::path path;
};
std::ostream& operator<<(std::ostream& o, const CorpusFile& c) {
  return o << c.path.filename().string();
}

std::vector<CorpusFile> corpus(bool seeds_only) {
  std::vector<CorpusFile> out;
  for (const auto& [kind, dir] :
       {std::pair{Kind::gguf, "gguf"}, std::pair{Kind::safetensors, "safetensors"}}) {
    for (const auto& e : fs::directory_iterator(fs::path(ACTORLM_FORMAT_CORPUS) / dir)) {
      if (!e.is_regular_file()) continue;
      if (seeds_only && e.path().filename().string().rfind("seed_", 0) != 0) continue;
      out.push_back({kind, e.path()});
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

constexpr std::array<std::uint64_t, 12> kLarge = {
    0, 1, 0x7f, 0xff, 0x7fffffff, 0xffffffff, 1ull << 32, 1ull << 60, (1ull << 63) - 1, 1ull << 63,
    ~std::uint64_t{0}, ~std::uint64_t{31}};

// One deterministic mutation of `seed` (the kinds a file goes wrong in, roughly equally often).
Bytes mutate(const Bytes& seed, Kind kind, std::mt19937_64& rng) {
  Bytes b = seed;
  const auto pick = [&](std::size_t n) {
    return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1));
  };
  // Header region: where counts, lengths and offsets live (GGUF directory; safetensors length).
  const std::size_t header = std::min<std::size_t>(b.size(), kind == Kind::gguf ? 512 : 8);
  switch (rng() % 6) {
    case 0:  // flip a few bytes
      for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n && !b.empty(); ++i) {
        b[pick(b.size())] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      }
      break;
    case 1:  // cut
      b.resize(pick(b.size()));
      break;
    case 2: {  // a large integer over a header field, 4 or 8 bytes wide
      const std::uint64_t v = kLarge[pick(kLarge.size())] + (rng() % 4 == 0 ? b.size() : 0);
      const std::size_t width = rng() % 2 ? 8 : 4;
      if (header < width) break;
      const std::size_t at = kind == Kind::gguf ? pick(header - width + 1) / 4 * 4 : 0;
      std::memcpy(b.data() + at, &v, width);
      break;
    }
    case 3: {  // a byte range removed or repeated
      if (b.empty()) break;
      const std::size_t at = pick(b.size()), n = 1 + pick(16);
      if (rng() % 2) {
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                b.begin() + static_cast<std::ptrdiff_t>(std::min(b.size(), at + n)));
      } else {
        const Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(at),
                          b.begin() + static_cast<std::ptrdiff_t>(std::min(b.size(), at + n)));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size())), chunk.begin(),
                 chunk.end());
      }
      break;
    }
    case 4: {  // a number in the JSON header (or any digit) replaced by an extreme one
      static const std::array<const char*, 7> numbers = {
          "18446744073709551615", "9223372036854775808", "-1", "1e300", "0", "4294967296", "1.5"};
      std::vector<std::size_t> digits;
      for (std::size_t i = 8; i < std::min<std::size_t>(b.size(), 4096); ++i) {
        if (b[i] >= '0' && b[i] <= '9') digits.push_back(i);
      }
      if (digits.empty()) break;
      std::size_t at = digits[pick(digits.size())], end = at;
      while (end < b.size() && b[end] >= '0' && b[end] <= '9') ++end;
      const std::string n = numbers[pick(numbers.size())];
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
              b.begin() + static_cast<std::ptrdiff_t>(end));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), n.begin(), n.end());
      if (kind == Kind::safetensors && b.size() >= 8) {  // keep the header length consistent
        std::uint64_t len;
        std::memcpy(&len, b.data(), 8);
        len = len + n.size() - (end - at);
        std::memcpy(b.data(), &len, 8);
      }
      break;
    }
    default:  // a few random bytes anywhere
      for (int i = 0; i < 8 && !b.empty(); ++i)
        b[pick(b.size())] = static_cast<std::uint8_t>(rng());
      break;
  }
  return b;
}

int iterations() {
  const char* s = std::getenv("ACTORLM_FUZZ_ITERATIONS");
  return s != nullptr ? std::atoi(s) : 1500;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_corpus_holds_valid_seeds_of_both_formats) {
  const auto seeds = corpus(true);
  BOOST_TEST(
      std::count_if(seeds.begin(), seeds.end(), [](auto& c) { return c.kind == Kind::gguf; }) >= 2);
  BOOST_TEST(std::count_if(seeds.begin(), seeds.end(),
                           [](auto& c) { return c.kind == Kind::safetensors; }) >= 2);
  for (const CorpusFile& c : seeds) BOOST_TEST(exercise(c.kind, c.path.string()), c.path);
}

BOOST_DATA_TEST_CASE(every_corpus_file_opens_or_fails_with_a_model_file_error,
                     data::make(corpus(false)), c) {
  MemFile mem;
  BOOST_CHECK_NO_THROW(exercise(c.kind, mem.set(read_file(c.path))));
}

BOOST_DATA_TEST_CASE(every_mutation_of_a_seed_opens_or_fails_with_a_model_file_error,
                     data::make(corpus(true)), c) {
  const Bytes seed = read_file(c.path);
  std::mt19937_64 rng(std::hash<std::string>{}(c.path.filename().string()));
  MemFile mem;
  int opened = 0;
  const int n = iterations();
  for (int i = 0; i < n; ++i) {
    const Bytes b = mutate(seed, c.kind, rng);
    BOOST_TEST_CHECKPOINT(c.path.filename().string() << " mutation " << i);
    try {
      opened += exercise(c.kind, mem.set(b)) ? 1 : 0;
    } catch (const std::exception& e) {
      const std::string keep =
          "fuzz_failure_" + c.path.filename().string() + "_" + std::to_string(i);
      std::ofstream(keep, std::ios::binary).write(reinterpret_cast<const char*>(b.data()),
                                                  static_cast<std::streamsize>(b.size()));
      BOOST_FAIL("mutation " << i << " threw " << e.what() << " (input kept as " << keep << ")");
    }
  }
  // Mutations both break files and leave some readable (flips in tensor data): both paths ran.
  BOOST_TEST(opened > 0);
  BOOST_TEST(opened < n);
  BOOST_TEST_MESSAGE(c.path.filename().string() << ": " << opened << " of " << n << " opened");
}
