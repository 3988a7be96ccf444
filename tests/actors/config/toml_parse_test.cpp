// parse_toml: what toml::parse gives, the same table or the same error, except that the text on
// which Debian's toml++ 3.3.0 reaches undefined behaviour never reaches it (toml_parse.hpp).
#define BOOST_TEST_MODULE actors_config_toml_parse
#include "actors/config/toml_parse.hpp"
#include "tests/support/corpus_files.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>

using namespace actorlm::config;
namespace data = boost::unit_test::data;
namespace fs = std::filesystem;

namespace {

struct BadText {
  const char* name;
  std::string toml;
  std::uint32_t line;
  std::uint32_t column;
  const char* message;  // a part of the error's description
};
std::ostream& operator<<(std::ostream& out, const BadText& c) { return out << c.name; }

// Each reached TOML_UNREACHABLE in is_non_ascii_horizontal_whitespace; most were found by the
// config fuzzer (tests/actors/config/corpus/regress_toml_unreachable_*).
const std::vector<BadText> bad_texts = {
    {"combining_mark_at_the_top", "\xcc\xaa", 1, 1, "saw '\xcc\xaa'"},
    {"letter_in_a_bare_key", "[server]\nho\xc3\xbest = \"x\"\n", 2, 3, "saw '\xc3\xbe'"},
    {"letter_in_an_inline_table_key", "server = { host = \"x\", l\xc3\xbe = 1 }\n", 1, 25, "saw '\xc3\xbe'"},
    {"letter_after_a_number_and_a_quote", "s =0\"\xc7\xa7\n", 1, 5, "expected digit, saw '\"'"},
    {"letter_after_a_bare_value_with_quotes", "a = 240s=\"\"\"\\\x08\xc2\xa7\"\n", 1, 8, "expected digit, saw 's'"},
    {"glagolitic_letter_at_the_top", "\xe2\xb1\x9e = 1\n", 1, 1, "saw '\xe2\xb1\x9e'"},
    {"letter_after_a_line_ending_backslash", "[model]\nname = \"\"\"\\\n  \xc2\xa7\"\"\"\n", 3, 3,
     "right after a backslash in a multi-line string"},
    {"arabic_form_after_a_line_ending_backslash", "a = \"\"\"\\\n\n\xef\xbb\x9f\"\"\"\n", 3, 1, "write it as \\uXXXX"},
    {"letter_escaped_by_a_backslash", "[model]\nname = \"\"\"\\\xd0\x96\"\"\"\n", 2, 12, "unknown escape sequence '\\\xd0\x96'"},
};

struct GoodText {
  const char* name;
  std::string toml;
};
std::ostream& operator<<(std::ostream& out, const GoodText& c) { return out << c.name; }

// Hole characters where valid TOML holds them: strings, quoted keys, comments.
const std::vector<GoodText> good_texts = {
    {"letters_in_strings", "name = \"Caf\xc3\xa9 \xd0\x96\"\npath = '\xc3\xbe'\npreset = \"\"\"\n\xc3\xbe\"\"\"\nx = '''\xe2\xb1\x9e'''\n"},
    {"letter_in_a_quoted_key_and_header", "[\"h\xc3\xbe\"]\n\"k\xc3\xa9\" = 1\na.\"\xc3\xa9\".b = 2\n"},
    {"letters_in_comments", "# \xc3\xbe\n[server] # \xcc\xaa\nport = 1 # \xe3\x80\x81\n"},
    {"byte_order_mark", "\xef\xbb\xbf[server]\nport = \"\xc3\xa9\"\n"},
    {"quotes_and_escapes_in_multi_line_strings", "a = \"\"\"x\"\"y\\\"\"\"\xc3\xbe\"\"\"\"\"\nb = '''it''s \\ \xc3\xbe'''\nc = \"\\\"\xc3\xbe\"\n"},
    {"an_escape_before_a_letter", "a = \"\"\"\\n\xc3\xbe\"\"\"\n"},
    {"emoji_after_a_line_ending_backslash", "a = \"\"\"\\\n\xf0\x9f\x98\x80 \xc3\xa9\"\"\"\n"},
};

}  // namespace

BOOST_DATA_TEST_CASE(text_that_reaches_toml_plus_plus_undefined_behaviour_is_a_parse_error_at_its_place,
                     data::make(bad_texts), c) {
  try {
    (void)detail::parse_toml(c.toml, "bad.toml");
    BOOST_FAIL("parsed");
  } catch (const toml::parse_error& e) {
    BOOST_TEST(e.source().begin.line == c.line);
    BOOST_TEST(e.source().begin.column == c.column);
    BOOST_TEST(std::string(e.description()).find(c.message) != std::string::npos, e.description());
    BOOST_TEST(*e.source().path == "bad.toml");
  }
}

BOOST_DATA_TEST_CASE(valid_text_with_those_characters_parses_as_toml_parse_has_it, data::make(good_texts), c) {
  BOOST_TEST(detail::parse_toml(c.toml, "good.toml") == toml::parse(std::string_view(c.toml), std::string_view("good.toml")));
}

BOOST_AUTO_TEST_CASE(every_toml_file_the_project_ships_parses_as_toml_parse_has_it) {
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(ACTORLM_CONFIGS_DIR)) {
    if (e.path().extension() != ".toml") continue;
    const std::string text = actorlm::testing::file_bytes(e.path());
    BOOST_TEST((detail::parse_toml(text, "f.toml") == toml::parse(std::string_view(text), std::string_view("f.toml"))), e.path());
    ++files;
  }
  BOOST_TEST(files >= 5);
}
