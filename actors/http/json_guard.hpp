#pragma once
// A first, streaming (SAX) read of a request body, before it becomes a JSON document. It refuses,
// with a 400 naming the field, what nlohmann's document parser would either accept silently or
// answer with an exception whose message quotes the client's bytes:
//   - invalid UTF-8 in a string value ("messages[0].content") or in a key (the key is named with
//     its bad bytes written as \xNN: "stream_options.inc\xFFlude");
//   - nesting deeper than max_depth arrays and objects;
//   - numbers out of range: a float that overflows a double (1e400), an integer literal outside
//     [-2^63, 2^64) (which the document parser would round to a double);
//   - a key given twice in one object (the document parser keeps the last one without a word).
// Any other syntax error is a 400 "invalid_json" without a param, its position in the message.
// Every message is valid UTF-8 and bounded in length, whatever the body holds.

#include "actors/http/api_error.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace actorlm::http {

struct JsonLimits {
  std::size_t max_depth = 64;  // arrays and objects open at once; a request needs about 5
};

// nullopt: the body is well-formed JSON that the document parser may parse without surprises.
std::optional<ApiError> check_json_body(std::string_view body, const JsonLimits& limits = {});

// `text` made safe to quote in a message: at most `max_bytes` bytes of it (cut at a character,
// "..." appended), every byte that is not part of valid UTF-8 written as \xNN.
std::string quote_safely(std::string_view text, std::size_t max_bytes = 200);

}  // namespace actorlm::http
