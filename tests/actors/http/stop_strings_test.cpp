// StopMatcher: stop strings found across token boundaries, text held back only while it could
// still become a stop string; checked against a direct search of the whole text.
#define BOOST_TEST_MODULE stop_strings
#include <boost/test/unit_test.hpp>

#include "actors/http/stop_strings.hpp"

#include <random>

using actorlm::http::StopMatcher;

namespace {

// Feeds `pieces`; returns the emitted text and whether it stopped.
std::pair<std::string, bool> feed(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
  StopMatcher m(std::move(stops));
  std::string out;
  for (const auto& p : pieces) {
    out += m.push(p);
    if (m.stopped()) break;
  }
  out += m.flush();
  return {out, m.stopped()};
}

}  // namespace

BOOST_AUTO_TEST_CASE(finds_a_stop_string_split_over_three_tokens) {
  const auto [text, stopped] = feed({"END"}, {"the E", "N", "D of it"});
  BOOST_TEST(stopped);
  BOOST_TEST(text == "the ");
}

BOOST_AUTO_TEST_CASE(releases_a_held_prefix_that_did_not_become_a_stop_string) {
  StopMatcher m({"END"});
  BOOST_TEST(m.push("an E") == "an ");
  BOOST_TEST(m.push("X") == "EX");
  BOOST_TEST(!m.stopped());
}

BOOST_AUTO_TEST_CASE(returns_held_text_at_the_end_when_nothing_matched) {
  const auto [text, stopped] = feed({"\n\n"}, {"one\n"});
  BOOST_TEST(!stopped);
  BOOST_TEST(text == "one\n");
}

BOOST_AUTO_TEST_CASE(stops_at_the_stop_string_that_completes_first) {
  const auto [text, stopped] = feed({"world", "lo"}, {"hello world"});
  BOOST_TEST(stopped);
  BOOST_TEST(text == "hel");
  // "abc" starts first but "b" completes first, in one piece or token by token.
  BOOST_TEST(feed({"abc", "b"}, {"xabc"}).first == "xa");
  BOOST_TEST(feed({"abc", "b"}, {"x", "a", "b", "c"}).first == "xa");
}

BOOST_AUTO_TEST_CASE(without_stop_strings_passes_text_through_at_once) {
  StopMatcher m({});
  BOOST_TEST(m.push("abc") == "abc");
  BOOST_TEST(m.flush().empty());
}

BOOST_AUTO_TEST_CASE(random_splits_give_the_same_text_as_searching_the_whole_string) {
  std::mt19937 rng(7);
  const std::string alphabet = "ab\n";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string whole;
    const int len = 1 + int(rng() % 30);
    for (int i = 0; i < len; ++i) whole += alphabet[rng() % alphabet.size()];
    std::vector<std::string> stops;
    for (int s = 0, n = 1 + int(rng() % 3); s < n; ++s) {
      std::string stop;
      for (int i = 0, l = 1 + int(rng() % 3); i < l; ++i) stop += alphabet[rng() % alphabet.size()];
      stops.push_back(stop);
    }
    std::vector<std::string> pieces;
    for (std::size_t i = 0; i < whole.size();) {
      const std::size_t l = 1 + rng() % 4;
      pieces.push_back(whole.substr(i, l));
      i += l;
    }
    // Reference: the first end position at which some stop string completes (longest on ties).
    std::size_t first = std::string::npos;
    for (std::size_t end = 1; end <= whole.size() && first == std::string::npos; ++end)
      for (const auto& s : stops)
        if (s.size() <= end && whole.compare(end - s.size(), s.size(), s) == 0)
          first = std::min(first, end - s.size());
    const auto [text, stopped] = feed(stops, pieces);
    BOOST_TEST_REQUIRE(stopped == (first != std::string::npos), whole);
    BOOST_TEST_REQUIRE(text == (stopped ? whole.substr(0, first) : whole), whole);
  }
}

BOOST_AUTO_TEST_CASE(include_stop_str_in_output_keeps_the_stop_string_and_cuts_after_it) {
  StopMatcher m({"END"}, true);
  std::string out = m.push("the E");
  out += m.push("ND of it");
  BOOST_TEST(m.stopped());
  BOOST_TEST(out == "the END");
}

BOOST_AUTO_TEST_CASE(text_pushed_disarmed_ends_no_stop_string_but_may_start_one) {
  StopMatcher m({"ab"});
  BOOST_TEST(m.push("xab", false) == "xab");  // "ab" ends in disarmed text: no stop
  BOOST_TEST(!m.stopped());
  BOOST_TEST(m.push("a", false) == "");  // held: it may start a stop string
  BOOST_TEST(m.push("b") == "");         // starts in disarmed text, ends in armed text: stops
  BOOST_TEST(m.stopped());
  StopMatcher later({"ab"});
  BOOST_TEST(later.push("ab", false) == "ab");
  BOOST_TEST(later.push("cab") == "c");
  BOOST_TEST(later.stopped());
}
