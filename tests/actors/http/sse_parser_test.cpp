// actors/http/sse_parser.hpp: the Server-Sent Events reader that the HTTP tests and
// `actorlm bench serve` use on the server's streams.
#define BOOST_TEST_MODULE actors_http_sse_parser
#include "actors/http/sse_parser.hpp"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

namespace {

using actorlm::http::SseParser;
using Payloads = std::vector<std::string>;

// Feeds `body` in reads of `read_size` bytes (the last one shorter) and collects the payloads.
Payloads parse_in_reads(const std::string& body, std::size_t read_size) {
  SseParser parser;
  Payloads out;
  for (std::size_t at = 0; at < body.size(); at += read_size)
    for (auto& p : parser.feed(std::string_view(body).substr(at, read_size))) out.push_back(p);
  return out;
}

// A stream as HttpServer writes it, with a keep-alive comment, in LF and CRLF line endings.
const std::string lf_stream =
    ": keep-alive\n\n"
    "data: {\"choices\":[{\"text\":\" a\"}]}\n\n"
    "data: {\"choices\":[{\"text\":\" b\"}]}\n\n"
    "data: [DONE]\n\n";
const Payloads lf_payloads = {R"({"choices":[{"text":" a"}]})", R"({"choices":[{"text":" b"}]})",
                              "[DONE]"};

std::string with_crlf(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("\r\n") : std::string(1, c);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(returns_each_events_data_without_the_prefix_and_done_as_a_payload) {
  SseParser parser;
  BOOST_TEST(parser.feed(lf_stream) == lf_payloads, boost::test_tools::per_element());
  BOOST_TEST(parser.feed("") == Payloads{}, boost::test_tools::per_element());
  BOOST_TEST(lf_payloads.back() == actorlm::http::sse_done);
}

BOOST_DATA_TEST_CASE(an_event_split_across_reads_comes_out_once_whole,
                     boost::unit_test::data::make({1, 2, 3, 5, 7, 13, 64}), read_size) {
  BOOST_TEST(parse_in_reads(lf_stream, read_size) == lf_payloads, boost::test_tools::per_element());
}

BOOST_DATA_TEST_CASE(crlf_line_endings_read_like_lf_even_when_a_crlf_is_split,
                     boost::unit_test::data::make({1, 2, 3, 4, 5, 64}), read_size) {
  BOOST_TEST(parse_in_reads(with_crlf(lf_stream), read_size) == lf_payloads,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_lone_cr_ends_a_line) {
  SseParser parser;
  BOOST_TEST(parser.feed("data: x\r\rdata: y\r") == Payloads{"x"}, boost::test_tools::per_element());
  BOOST_TEST(parser.feed("\r") == Payloads{"y"}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(comments_and_events_without_data_dispatch_nothing) {
  SseParser parser;
  BOOST_TEST(parser.feed(": ping\n\nevent: note\nid: 7\nretry: 10\n\n:data: no\n\n") == Payloads{},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_event_waits_for_its_blank_line) {
  SseParser parser;
  BOOST_TEST(parser.feed("data: [DONE]\n") == Payloads{}, boost::test_tools::per_element());
  BOOST_TEST(parser.feed("\n") == Payloads{"[DONE]"}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(data_lines_join_with_newlines_and_one_leading_space_is_dropped) {
  SseParser parser;
  BOOST_TEST(parser.feed("data:a\ndata:  b\ndata\ndata: \n\n") == Payloads{"a\n b\n\n"},
             boost::test_tools::per_element());
  BOOST_TEST(parser.feed("data:\n\n") == Payloads{""}, boost::test_tools::per_element());
}
