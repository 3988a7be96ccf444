#pragma once
// An HTTP error in OpenAI's JSON shape: {"error": {"message", "type", "param", "code"}}.
// Plain C++; the server renders it with nlohmann-json.

#include <string>

namespace actorlm::http {

struct ApiError {
  int status = 400;
  std::string message;                       // says what is wrong and, where known, the value
  std::string type = "invalid_request_error";
  std::string param;                         // the offending field, empty when none
  std::string code;                          // short machine-readable reason, empty when none

  std::string to_json() const;
};

inline ApiError bad_field(std::string param, std::string message) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), "invalid_value"};
}

}  // namespace actorlm::http
