// Robustness of parse_config in every build: each file of the config fuzzer's corpus (corpus/:
// seeds, and inputs that once broke the parser), the shipped daemon configs, and deterministic
// mutations of the seeds (bytes flipped, lines dropped or repeated, schema words and non-ASCII
// characters inserted) give a valid config that to_toml prints back to itself, or errors and the
// default config; nothing escapes. tools/fuzz/config_input.hpp holds the properties, shared
// with the libFuzzer target. ACTORLM_FUZZ_ITERATIONS sets the mutations per seed (default 1500).
#define BOOST_TEST_MODULE actors_config_fuzz_corpus
#include "tests/support/corpus_files.hpp"
#include "tools/fuzz/config_input.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <random>
#include <sstream>

namespace data = boost::unit_test::data;
namespace fs = std::filesystem;

namespace {

using actorlm::testing::file_bytes;

// The corpus (or its seeds alone), and with the whole corpus the shipped daemon configs.
std::vector<fs::path> files(bool seeds_only) {
  std::vector<fs::path> out = actorlm::testing::corpus_files(ACTORLM_CONFIG_CORPUS, seeds_only ? "seed_" : "");
  if (!seeds_only)
    for (const fs::path& p : actorlm::testing::corpus_files(ACTORLM_CONFIGS_DIR))
      if (p.extension() == ".toml") out.push_back(p);
  return out;
}

constexpr std::array<const char*, 16> kInserts = {
    "[server]\n", "[sim]\n", "port = ", "\"", "'''", "\"\"\"", "\\", "\n", "=", "9223372036854775808",
    "\xc3\xbe", "\xcc\xaa", "\xe3\x80\x81", "\xef\xbb\xbf", "# ", "inf"};

std::string mutate(const std::string& seed, std::mt19937_64& rng) {
  std::string s = seed;
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1)); };
  switch (rng() % 4) {
    case 0:  // flip a few bytes
      for (int i = 0, n = 1 + static_cast<int>(rng() % 3); i < n && !s.empty(); ++i)
        s[pick(s.size())] ^= static_cast<char>(1 + rng() % 255);
      break;
    case 1: {  // a line dropped or repeated
      std::vector<std::string> lines;
      std::stringstream in(s);
      for (std::string l; std::getline(in, l);) lines.push_back(l + "\n");
      if (lines.empty()) break;
      const std::size_t at = pick(lines.size());
      if (rng() % 2) lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(at));
      else lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(pick(lines.size())), lines[at]);
      s.clear();
      for (const auto& l : lines) s += l;
      break;
    }
    case 2:  // a schema word, quote, escape or non-ASCII character inserted
      s.insert(pick(s.size() + 1), kInserts[pick(kInserts.size())]);
      break;
    default:  // cut
      s.resize(pick(s.size() + 1));
      break;
  }
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_corpus_holds_valid_seeds_and_the_found_regressions) {
  const auto seeds = files(true);
  BOOST_TEST(seeds.size() >= 3u);
  int valid = 0;
  for (const fs::path& p : seeds) valid += actorlm::config::parse_config(file_bytes(p), p.string()).ok() ? 1 : 0;
  BOOST_TEST(valid >= 3);
  const auto all = files(false);
  BOOST_TEST(std::count_if(all.begin(), all.end(), [](const fs::path& p) {
               return p.filename().string().rfind("regress_", 0) == 0;
             }) >= 3);
}

BOOST_DATA_TEST_CASE(every_corpus_file_is_a_config_that_round_trips_or_errors, data::make(files(false)), path) {
  std::string wrong;
  BOOST_REQUIRE_NO_THROW(wrong = actorlm::fuzz::config_property_violation(file_bytes(path)));
  BOOST_TEST(wrong.empty(), wrong);
}

BOOST_DATA_TEST_CASE(every_mutation_of_a_seed_is_a_config_that_round_trips_or_errors, data::make(files(true)), path) {
  const std::string seed = file_bytes(path);
  std::mt19937_64 rng(std::hash<std::string>{}(path.filename().string()));
  int valid = 0;
  const int n = actorlm::testing::fuzz_iterations(1500);
  for (int i = 0; i < n; ++i) {
    const std::string text = mutate(seed, rng);
    BOOST_TEST_CHECKPOINT(path.filename().string() << " mutation " << i);
    std::string wrong;
    try {
      wrong = actorlm::fuzz::config_property_violation(text);
    } catch (const std::exception& e) {
      wrong = std::string("threw ") + e.what();
    }
    if (!wrong.empty()) {
      const std::string keep = "fuzz_failure_" + path.filename().string() + "_" + std::to_string(i);
      std::ofstream(keep, std::ios::binary) << text;
      BOOST_FAIL("mutation " << i << ": " << wrong << " (input kept as " << keep << ")");
    }
    valid += actorlm::config::parse_config(text, "m.toml").ok() ? 1 : 0;
  }
  BOOST_TEST(valid < n);  // mutations break the seed at least sometimes: the error path ran
  BOOST_TEST_MESSAGE(path.filename().string() << ": " << valid << " of " << n << " valid");
}
