#pragma once
// Test support: parse_request's two outcomes, each failing the test when the other comes.

#include "actors/http/openai_request.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

namespace actorlm::testing {

inline http::CompletionRequest parse_ok(http::Endpoint ep, const std::string& body) {
  auto r = http::parse_request(ep, body);
  if (auto* e = std::get_if<http::ApiError>(&r)) BOOST_FAIL("unexpected error: " + e->message);
  return std::get<http::CompletionRequest>(r);
}

inline http::ApiError parse_bad(http::Endpoint ep, const std::string& body) {
  auto r = http::parse_request(ep, body);
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<http::ApiError>(r), "accepted: " + body);
  return std::get<http::ApiError>(r);
}

}  // namespace actorlm::testing
