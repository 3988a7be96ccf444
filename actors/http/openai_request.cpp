#include "actors/http/openai_request.hpp"

#include "actors/http/json_guard.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>

namespace actorlm::http {

using nlohmann::json;

std::string ApiError::to_json() const {
  json e{{"message", message}, {"type", type},
         {"param", param.empty() ? json(nullptr) : json(param)},
         {"code", code.empty() ? json(nullptr) : json(code)}};
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);  // never throws on bad UTF-8
}

namespace {

// Thrown inside the parser, caught once at the top (keeps every check a one-liner).
struct Bad {
  ApiError error;
};

[[noreturn]] void fail(const std::string& field, const std::string& why) { throw Bad{bad_field(field, field + ": " + why)}; }

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

std::string bound(double x) { return std::floor(x) == x ? std::to_string(static_cast<long long>(x)) : json(x).dump(); }

double number(const json& v, const std::string& field, double lo, double hi) {
  const std::string range = "[" + bound(lo) + ", " + bound(hi) + "]";
  if (!v.is_number()) fail(field, "expected a number in " + range + ", found " + type_name(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) fail(field, "must be in " + range + ", found " + v.dump());
  return x;
}

std::int64_t integer(const json& v, const std::string& field, std::int64_t lo, std::int64_t hi) {
  const bool integral_float = v.is_number_float() && std::isfinite(v.get<double>()) &&
                              std::floor(v.get<double>()) == v.get<double>() && std::fabs(v.get<double>()) < 9e15;
  if (!v.is_number_integer() && !integral_float)
    fail(field, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], found " +
                    (v.is_number() ? v.dump() : type_name(v)));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
    fail(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], found " + v.dump());
  const std::int64_t x = integral_float ? static_cast<std::int64_t>(v.get<double>()) : v.get<std::int64_t>();
  if (x < lo || x > hi)
    fail(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], found " + std::to_string(x));
  return x;
}

bool boolean(const json& v, const std::string& field) {
  if (!v.is_boolean()) fail(field, "expected a boolean, found " + type_name(v));
  return v.get<bool>();
}

std::string string(const json& v, const std::string& field) {
  if (!v.is_string()) fail(field, "expected a string, found " + type_name(v));
  return v.get<std::string>();
}

std::vector<std::int64_t> token_list(const json& v, const std::string& field) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    out.push_back(integer(v[i], field + "[" + std::to_string(i) + "]", 0, std::numeric_limits<std::int32_t>::max()));
  if (out.empty()) fail(field, "must not be empty");
  return out;
}

std::vector<Prompt> prompts(const json& v) {
  std::vector<Prompt> out;
  if (v.is_string()) return {Prompt{v.get<std::string>(), {}, false}};
  if (!v.is_array() || v.empty())
    fail("prompt", v.is_array() ? "must not be an empty array"
                                : "expected a string, an array of strings, or token ids, found " + type_name(v));
  if (v[0].is_number()) return {Prompt{{}, token_list(v, "prompt"), true}};
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string f = "prompt[" + std::to_string(i) + "]";
    if (v[i].is_string()) out.push_back(Prompt{v[i].get<std::string>(), {}, false});
    else if (v[i].is_array()) out.push_back(Prompt{{}, token_list(v[i], f), true});
    else fail(f, "expected a string or an array of token ids, found " + type_name(v[i]));
  }
  if (out.size() > 64) fail("prompt", "at most 64 prompts per request, found " + std::to_string(out.size()));
  return out;
}

std::string message_content(const json& c, const std::string& field) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) fail(field, "expected a string or an array of content parts, found " + type_name(c));
  std::string text;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (!c[i].is_object() || !c[i].contains("type")) fail(f, "expected a content part {\"type\": \"text\", \"text\": ...}");
    const std::string type = string(c[i]["type"], f + ".type");
    if (type != "text") fail(f + ".type", "only \"text\" content parts are supported, found \"" + type + "\"");
    if (!c[i].contains("text")) fail(f + ".text", "missing");
    text += string(c[i]["text"], f + ".text");
  }
  return text;
}

std::vector<model::ChatMessage> messages(const json& v) {
  if (!v.is_array()) fail("messages", "expected an array of messages, found " + type_name(v));
  if (v.empty()) fail("messages", "must not be empty");
  std::vector<model::ChatMessage> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string f = "messages[" + std::to_string(i) + "]";
    if (!v[i].is_object()) fail(f, "expected an object with \"role\" and \"content\", found " + type_name(v[i]));
    if (!v[i].contains("role")) fail(f + ".role", "missing");
    const std::string role = string(v[i]["role"], f + ".role");
    if (role != "system" && role != "user" && role != "assistant" && role != "developer")
      fail(f + ".role", "must be \"system\", \"developer\", \"user\" or \"assistant\", found \"" + role + "\"");
    if (!v[i].contains("content") || v[i]["content"].is_null()) fail(f + ".content", "missing");
    for (const auto& [key, _] : v[i].items())
      if (key != "role" && key != "content" && key != "name") fail(f + "." + key, "is not supported");
    out.push_back({role == "developer" ? "system" : role, message_content(v[i]["content"], f + ".content")});
  }
  return out;
}

std::vector<std::string> stops(const json& v) {
  std::vector<std::string> out;
  if (v.is_string()) out.push_back(v.get<std::string>());
  else if (v.is_array())
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back(string(v[i], "stop[" + std::to_string(i) + "]"));
  else fail("stop", "expected a string or an array of strings, found " + type_name(v));
  if (out.size() > 16) fail("stop", "at most 16 stop strings, found " + std::to_string(out.size()));
  for (const auto& s : out)
    if (s.empty()) fail("stop", "stop strings must not be empty");
  return out;
}

CompletionRequest parse(Endpoint ep, const json& body) {
  if (!body.is_object()) fail("body", "expected a JSON object, found " + type_name(body));
  static const std::set<std::string> common = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "seed", "logprobs",
      "presence_penalty", "frequency_penalty", "user", "priority", "stream", "stream_options"};
  CompletionRequest r;
  r.endpoint = ep;
  for (const auto& [key, _] : body.items()) {
    const bool ok = common.count(key) ||
                    (ep == Endpoint::completions ? key == "prompt"
                                                 : (key == "messages" || key == "max_completion_tokens" || key == "top_logprobs"));
    if (!ok) fail(key, "unknown or unsupported field for " +
                           std::string(ep == Endpoint::chat ? "/v1/chat/completions" : "/v1/completions"));
  }
  auto has = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  if (!has("model")) fail("model", "missing");
  r.model = string(body["model"], "model");
  if (ep == Endpoint::completions) {
    if (!has("prompt")) fail("prompt", "missing");
    r.prompts = prompts(body["prompt"]);
  } else {
    if (!has("messages")) fail("messages", "missing");
    r.messages = messages(body["messages"]);
  }
  if (has("max_tokens")) r.max_tokens = static_cast<std::uint32_t>(integer(body["max_tokens"], "max_tokens", 1, 1 << 24));
  if (has("max_completion_tokens")) {
    const auto m = static_cast<std::uint32_t>(integer(body["max_completion_tokens"], "max_completion_tokens", 1, 1 << 24));
    if (r.max_tokens && *r.max_tokens != m)
      fail("max_completion_tokens", "differs from max_tokens (" + std::to_string(*r.max_tokens) + "); give one of them");
    r.max_tokens = m;
  }
  if (has("temperature")) r.temperature = static_cast<float>(number(body["temperature"], "temperature", 0, 2));
  if (has("top_p")) {
    r.top_p = static_cast<float>(number(body["top_p"], "top_p", 0, 1));
    if (r.top_p <= 0) fail("top_p", "must be in (0, 1], found " + body["top_p"].dump());
  }
  if (has("top_k")) r.top_k = static_cast<std::int32_t>(integer(body["top_k"], "top_k", -1, 1 << 20));
  if (r.top_k < 0) r.top_k = 0;
  if (has("min_p")) r.min_p = static_cast<float>(number(body["min_p"], "min_p", 0, 1));
  if (has("n")) r.n = static_cast<std::uint32_t>(integer(body["n"], "n", 1, 128));
  if (has("stop")) r.stop = stops(body["stop"]);
  if (has("seed")) r.seed = static_cast<std::uint64_t>(integer(body["seed"], "seed", std::numeric_limits<std::int64_t>::min(),
                                                               std::numeric_limits<std::int64_t>::max()));
  if (ep == Endpoint::completions) {
    if (has("logprobs")) {
      r.top_logprobs = static_cast<std::uint32_t>(integer(body["logprobs"], "logprobs", 0, 5));
      r.logprobs = true;
    }
  } else {
    if (has("logprobs")) r.logprobs = boolean(body["logprobs"], "logprobs");
    if (has("top_logprobs")) {
      r.top_logprobs = static_cast<std::uint32_t>(integer(body["top_logprobs"], "top_logprobs", 0, 20));
      if (!r.logprobs) fail("top_logprobs", "needs \"logprobs\": true");
    }
  }
  if (has("presence_penalty")) r.presence_penalty = static_cast<float>(number(body["presence_penalty"], "presence_penalty", -2, 2));
  if (has("frequency_penalty")) r.frequency_penalty = static_cast<float>(number(body["frequency_penalty"], "frequency_penalty", -2, 2));
  if (has("user")) r.user = string(body["user"], "user");
  if (has("priority")) r.priority = static_cast<std::int32_t>(integer(body["priority"], "priority", -1'000'000, 1'000'000));
  if (has("stream")) r.stream = boolean(body["stream"], "stream");
  if (has("stream_options")) {
    const json& so = body["stream_options"];
    if (!so.is_object()) fail("stream_options", "expected an object, found " + type_name(so));
    if (!r.stream) fail("stream_options", "only allowed with \"stream\": true");
    for (const auto& [key, v] : so.items()) {
      if (key != "include_usage") fail("stream_options." + key, "unknown field");
      if (!v.is_null()) r.include_usage = boolean(v, "stream_options.include_usage");
    }
  }
  return r;
}

}  // namespace

std::variant<CompletionRequest, ApiError> parse_request(Endpoint ep, std::string_view body) {
  if (auto refused = check_json_body(body)) return *refused;  // bad UTF-8, depth, numbers, duplicate keys
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::parse_error& e) {
    return ApiError{400, std::string("the body is not valid JSON: ") + e.what(), "invalid_request_error", "", "invalid_json"};
  }
  try {
    return parse(ep, doc);
  } catch (const Bad& b) {
    return b.error;
  }
}

}  // namespace actorlm::http
