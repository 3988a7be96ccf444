// Robustness of parse_request in every build: each file of the request fuzzer's corpus
// (corpus/request: seeds, and inputs that once broke the parser) and thousands of generated
// bodies (the fuzzer's own generator on pseudo-random bytes) either parse into a request whose
// values are in range or are refused with a 400 that names its field and renders as JSON.
// tools/fuzz/request_input.hpp reads an input as the fuzzer does. ACTORLM_FUZZ_ITERATIONS sets
// the generated bodies per endpoint (default 5000).
#define BOOST_TEST_MODULE request_fuzz_corpus
#include "tests/support/corpus_files.hpp"
#include "tools/fuzz/request_input.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <random>

using namespace actorlm;
namespace data = boost::unit_test::data;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes read_file(const fs::path& p) {
  const std::string s = testing::file_bytes(p);
  return Bytes(s.begin(), s.end());
}

std::vector<fs::path> corpus() { return testing::corpus_files(ACTORLM_REQUEST_CORPUS); }

}  // namespace

BOOST_AUTO_TEST_CASE(the_corpus_holds_seeds_of_both_endpoints_in_both_modes) {
  int raw_completions = 0, raw_chat = 0, generated = 0;
  for (const fs::path& p : corpus()) {
    const Bytes b = read_file(p);
    if (p.filename().string().rfind("seed_", 0) != 0 || b.empty()) continue;
    raw_completions += b[0] == 'c';
    raw_chat += b[0] == 'h';
    generated += b[0] != 'c' && b[0] != 'h';
  }
  BOOST_TEST(raw_completions >= 2);
  BOOST_TEST(raw_chat >= 2);
  BOOST_TEST(generated >= 2);
}

BOOST_DATA_TEST_CASE(every_corpus_file_parses_or_is_a_400_naming_its_field, data::make(corpus()), path) {
  const Bytes b = read_file(path);
  const fuzz::RequestInput in = fuzz::request_input(b.data(), b.size());
  std::string wrong;
  BOOST_REQUIRE_NO_THROW(wrong = fuzz::request_property_violation(in.endpoint, in.body));
  BOOST_TEST(wrong.empty(), wrong);
}

BOOST_DATA_TEST_CASE(every_generated_body_parses_or_is_a_400_naming_its_field,
                     data::make(std::vector<std::uint8_t>{0, 1}), endpoint_bit) {
  std::mt19937_64 rng(14 + endpoint_bit);
  int accepted = 0;
  const int n = testing::fuzz_iterations(5000);
  for (int i = 0; i < n; ++i) {
    Bytes b(1 + rng() % 512);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    b[0] = static_cast<std::uint8_t>((rng() % 64) * 2 + endpoint_bit);  // generated, never 'c'/'h'
    if (b[0] == 'c' || b[0] == 'h') b[0] = endpoint_bit;
    const fuzz::RequestInput in = fuzz::request_input(b.data(), b.size());
    BOOST_TEST_CHECKPOINT("generated body " << i);
    std::string wrong;
    try {
      wrong = fuzz::request_property_violation(in.endpoint, in.body);
    } catch (const std::exception& e) {
      wrong = std::string("threw ") + e.what();
    }
    if (!wrong.empty()) {
      const std::string keep = "fuzz_failure_request_" + std::to_string(endpoint_bit) + "_" + std::to_string(i);
      std::ofstream(keep, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
      BOOST_FAIL("generated body " << i << ": " << wrong << " (input kept as " << keep << ")");
    }
    accepted += std::holds_alternative<http::CompletionRequest>(http::parse_request(in.endpoint, in.body)) ? 1 : 0;
  }
  // Generated bodies reach both outcomes: some get through every field's checks, most do not.
  BOOST_TEST(accepted > 0);
  BOOST_TEST(accepted < n);
  BOOST_TEST_MESSAGE("endpoint bit " << int(endpoint_bit) << ": " << accepted << " of " << n << " accepted");
}
