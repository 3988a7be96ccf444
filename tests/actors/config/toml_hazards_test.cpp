// find_toml_hazard: the places where Debian's toml++ 3.3.0 reaches undefined behaviour are found,
// at their line and column, and no valid TOML the project reads is refused.
#define BOOST_TEST_MODULE actors_config_toml_hazards
#include "actors/config/config.hpp"
#include "actors/config/toml_hazards.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace actorlm::config;
namespace data = boost::unit_test::data;
namespace fs = std::filesystem;

namespace {

struct HazardCase {
  const char* name;
  std::string toml;
  std::uint32_t line;  // 0: no hazard
  std::uint32_t column;
};
std::ostream& operator<<(std::ostream& out, const HazardCase& c) { return out << c.name; }

const std::vector<HazardCase> cases = {
    // Found by the config fuzzer; each reached TOML_UNREACHABLE in is_non_ascii_horizontal_whitespace.
    {"combining_mark_at_the_top", "\xcc\xaa", 1, 1},
    {"letter_in_a_bare_key", "[server]\nho\xc3\xbest = \"x\"\n", 2, 3},
    {"letter_in_an_inline_table_key", "server = { host = \"x\", l\xc3\xbe = 1 }\n", 1, 25},
    {"letter_after_a_number_and_a_quote", "s =0\"\xc7\xa7\n", 1, 6},
    {"letter_after_a_line_ending_backslash", "[model]\nname = \"\"\"\\\n  \xc2\xa7\"\"\"\n", 3, 3},
    {"letter_escaped_by_a_backslash", "[model]\nname = \"\"\"\\\xd0\x96\"\"\"\n", 2, 12},
    {"cjk_space_neighbour_after_a_line_ending_backslash", "a = \"\"\"\\\n\xe3\x80\x81\"\"\"", 2, 1},
    // Valid TOML: non-ASCII text in strings, quoted keys and comments, a byte order mark.
    {"non_ascii_in_strings", "[model]\nname = \"\xc3\xbe\xcc\xaa\"\npath = '\xc3\xbe'\npreset = \"\"\"\n\xc3\xbe\"\"\"\n", 0, 0},
    {"non_ascii_in_a_quoted_key", "[server]\n\"h\xc3\xbe\" = 1\n", 0, 0},
    {"non_ascii_in_comments", "# \xc3\xbe\n[server] # \xcc\xaa\nport = 1 # \xe3\x80\x81\n", 0, 0},
    {"byte_order_mark", "\xef\xbb\xbf[server]\nport = 1\n", 0, 0},
    {"quotes_inside_multi_line_strings", "a = \"\"\"x\"\"y\\\"\"\"\xc3\xbe\"\"\"\"\"\nb = '''it''s \xc3\xbe'''\n", 0, 0},
    {"an_escape_before_non_ascii_text", "a = \"\"\"\\n\xc3\xbe\"\"\"\n", 0, 0},
    {"emoji_after_a_line_ending_backslash", "a = \"\"\"\\\n\xf0\x9f\x98\x80\"\"\"\n", 0, 0},
};

}  // namespace

BOOST_DATA_TEST_CASE(finds_each_place_toml_plus_plus_misreads_and_no_other, data::make(cases), c) {
  const auto hazard = detail::find_toml_hazard(c.toml);
  BOOST_TEST(hazard.has_value() == (c.line != 0));
  if (hazard && c.line != 0) {
    BOOST_TEST(hazard->where.line == c.line);
    BOOST_TEST(hazard->where.column == c.column);
  }
}

BOOST_AUTO_TEST_CASE(parse_config_reports_a_hazard_as_one_error_at_its_position) {
  const ParseResult r = parse_config("[server]\nho\xc3\xbest = \"x\"\n", "bad.toml");
  BOOST_REQUIRE_EQUAL(r.errors.size(), 1u);
  BOOST_TEST(r.errors[0].to_string() ==
             "bad.toml:2:3: non-ASCII character outside a string or comment (TOML allows them only there)");
}

BOOST_AUTO_TEST_CASE(no_toml_file_the_project_ships_is_refused) {
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(ACTORLM_CONFIGS_DIR)) {
    if (e.path().extension() != ".toml") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    BOOST_TEST(!detail::find_toml_hazard(text.str()).has_value(), e.path());
    ++files;
  }
  BOOST_TEST(files >= 5);
}
