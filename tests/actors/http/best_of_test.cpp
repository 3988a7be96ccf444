// BestOfSelector: a prompt's samples gathered whole, the n of highest cumulative log-probability
// released together, best first, once the last one is done.
#define BOOST_TEST_MODULE best_of
#include <boost/test/unit_test.hpp>

#include "actors/http/best_of.hpp"

using namespace actorlm::http;

namespace {

ChoiceDelta piece(std::uint32_t index, std::string text, bool last) {
  ChoiceDelta d;
  d.index = index;
  d.text = std::move(text);
  if (last) d.finish_reason = "stop";
  return d;
}

}  // namespace

BOOST_AUTO_TEST_CASE(returns_the_n_samples_of_highest_cumulative_logprob_best_first) {
  BestOfSelector s(2, 2, 3);  // two prompts, n = 2 of best_of = 3 each
  BOOST_TEST(s.add(piece(0, "a", false), -1.0, 1).empty());
  BOOST_TEST(s.add(piece(1, "b", true), -0.5, 1).empty());
  BOOST_TEST(s.add(piece(5, "z", true), -9.0, 4).empty());  // the other prompt's: kept apart
  BOOST_TEST(s.add(piece(2, "c", true), -3.0, 2).empty());
  const auto out = s.add(piece(0, "a2", true), -0.7, 2);     // prompt 0's last sample
  BOOST_TEST_REQUIRE(out.size() == 2u);
  BOOST_TEST(out[0].index == 0u);
  BOOST_TEST(out[0].text == "b");
  BOOST_TEST(out[1].index == 1u);
  BOOST_TEST(out[1].text == "aa2");  // the whole sample, its deltas joined
  BOOST_TEST(*out[1].finish_reason == "stop");
  BOOST_TEST(s.returned_tokens() == 3u);  // of the returned samples only
  BOOST_TEST(s.add(piece(3, "x", true), -1.0, 1).empty());
  const auto second = s.add(piece(4, "y", true), -1.0, 1);
  BOOST_TEST_REQUIRE(second.size() == 2u);
  BOOST_TEST(second[0].index == 2u);  // prompt 1's choices: 2 and 3
  BOOST_TEST(second[0].text == "x");  // a tie keeps the lower sample first
  BOOST_TEST(second[1].text == "y");
}
