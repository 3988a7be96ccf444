#include "actors/http/openai_request.hpp"

#include "actors/http/json_guard.hpp"
#include "actors/shard/shard_messages.hpp"

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

void check_field_names(Endpoint ep, const json& body) {
  static const std::set<std::string> common = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "seed", "logprobs",
      "presence_penalty", "frequency_penalty", "user", "priority", "stream", "stream_options",
      // vLLM's extensions
      "ignore_eos", "min_tokens", "stop_token_ids", "include_stop_str_in_output", "skip_special_tokens",
      "spaces_between_special_tokens", "repetition_penalty", "return_tokens_as_token_ids", "add_special_tokens",
      "logit_bias", "best_of", "truncate_prompt_tokens", "prompt_logprobs"};
  static const std::set<std::string> completions = {"prompt", "echo"};
  static const std::set<std::string> chat = {"messages", "max_completion_tokens", "top_logprobs", "add_generation_prompt",
                                             "continue_final_message", "chat_template_kwargs"};
  for (const auto& [key, _] : body.items())
    if (!common.count(key) && !(ep == Endpoint::completions ? completions : chat).count(key))
      fail(key, "unknown or unsupported field for " +
                    std::string(ep == Endpoint::chat ? "/v1/chat/completions" : "/v1/completions"));
}

// {"token id": bias}: ids as decimal strings, biases in [-100, 100] (OpenAI's range; vLLM clamps).
std::vector<std::pair<std::int64_t, float>> logit_bias(const json& v) {
  if (!v.is_object()) fail("logit_bias", "expected an object of token ids to biases, found " + type_name(v));
  std::vector<std::pair<std::int64_t, float>> out;
  for (const auto& [key, bias] : v.items()) {
    const std::string f = "logit_bias." + key;
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(key) > std::numeric_limits<std::int32_t>::max())
      fail("logit_bias", "keys must be token ids (decimal integers), found \"" + key + "\"");
    out.emplace_back(std::stoll(key), static_cast<float>(number(bias, f, -100, 100)));
  }
  return out;
}

std::vector<std::int64_t> stop_token_ids(const json& v) {
  if (!v.is_array()) fail("stop_token_ids", "expected an array of token ids, found " + type_name(v));
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    out.push_back(integer(v[i], "stop_token_ids[" + std::to_string(i) + "]", 0, std::numeric_limits<std::int32_t>::max()));
  return out;
}

// vLLM's sampling and output extensions, both endpoints.
void parse_extensions(const json& body, CompletionRequest& r) {
  auto has = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  auto flag = [&](const char* k, bool& out) {
    if (has(k)) out = boolean(body[k], k);
  };
  flag("ignore_eos", r.ignore_eos);
  if (has("min_tokens")) r.min_tokens = static_cast<std::uint32_t>(integer(body["min_tokens"], "min_tokens", 0, 1 << 24));
  if (r.max_tokens && r.min_tokens > *r.max_tokens)
    fail("min_tokens", "must be at most max_tokens (" + std::to_string(*r.max_tokens) + "), found " + std::to_string(r.min_tokens));
  if (has("stop_token_ids")) r.stop_token_ids = stop_token_ids(body["stop_token_ids"]);
  flag("include_stop_str_in_output", r.include_stop_str_in_output);
  flag("skip_special_tokens", r.skip_special_tokens);
  flag("spaces_between_special_tokens", r.spaces_between_special_tokens);
  if (has("repetition_penalty")) {
    // vLLM takes any number > 0; the bound keeps penalised logits finite (so a row never ends up
    // all -inf, which a shard could not sample from).
    r.repetition_penalty = static_cast<float>(number(body["repetition_penalty"], "repetition_penalty", 0, 1e6));
    if (r.repetition_penalty <= 0)
      fail("repetition_penalty", "must be in (0, 1000000], found " + body["repetition_penalty"].dump());
  }
  flag("return_tokens_as_token_ids", r.return_tokens_as_token_ids);
  r.add_special_tokens = r.endpoint == Endpoint::completions;
  flag("add_special_tokens", r.add_special_tokens);
  if (has("logit_bias")) r.logit_bias = logit_bias(body["logit_bias"]);
  if (has("best_of")) {
    r.best_of = static_cast<std::uint32_t>(integer(body["best_of"], "best_of", 1, 128));
    if (*r.best_of < r.n)
      fail("best_of", "must be at least n (" + std::to_string(r.n) + "), found " + std::to_string(*r.best_of));
    if (r.stream && *r.best_of > r.n)
      fail("best_of", "must equal n when streaming (the best samples are known only at the end), found " +
                          std::to_string(*r.best_of) + " with n = " + std::to_string(r.n));
  }
  if (has("truncate_prompt_tokens")) {
    r.truncate_prompt_tokens = integer(body["truncate_prompt_tokens"], "truncate_prompt_tokens", -1, 1LL << 31);
    if (*r.truncate_prompt_tokens == 0)
      fail("truncate_prompt_tokens", "must be -1 (the context length) or at least 1, found 0");
  }
  if (has("prompt_logprobs")) {
    // vLLM: k >= 0, or -1 for the whole vocabulary; refused with stream (its check).
    if (body["prompt_logprobs"] == -1)
      fail("prompt_logprobs", "-1 (every token of the vocabulary at every prompt position) is not supported; "
                              "ask for at most 20 alternatives");
    const auto k = integer(body["prompt_logprobs"], "prompt_logprobs", 0, shard::max_top_logprobs);
    if (r.stream) fail("prompt_logprobs", "not available when \"stream\" is true (as in vLLM)");
    r.prompt_logprobs = static_cast<std::uint32_t>(k);
  }
  if (r.endpoint == Endpoint::completions) {
    flag("echo", r.echo);
  }
}

// Chat template switches: the request's fields, then chat_template_kwargs, which vLLM merges over
// them. Other kwargs are taken and change nothing: the chat formats here read no other
// variables, as a Jinja template ignores the ones it does not use.
void parse_chat_template(const json& body, CompletionRequest& r) {
  auto has = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  if (has("add_generation_prompt")) r.add_generation_prompt = boolean(body["add_generation_prompt"], "add_generation_prompt");
  if (has("continue_final_message"))
    r.continue_final_message = boolean(body["continue_final_message"], "continue_final_message");
  if (has("chat_template_kwargs")) {
    const json& kw = body["chat_template_kwargs"];
    if (!kw.is_object()) fail("chat_template_kwargs", "expected an object, found " + type_name(kw));
    for (const auto& [key, v] : kw.items()) {
      if (key == "add_generation_prompt" && !v.is_null()) r.add_generation_prompt = boolean(v, "chat_template_kwargs." + key);
      if (key == "continue_final_message" && !v.is_null()) r.continue_final_message = boolean(v, "chat_template_kwargs." + key);
    }
  }
  if (r.continue_final_message && r.add_generation_prompt)
    fail("continue_final_message", "cannot be true together with add_generation_prompt (true by default); "
                                   "set \"add_generation_prompt\": false");
}

void parse_stream_options(const json& so, CompletionRequest& r) {
  if (!so.is_object()) fail("stream_options", "expected an object, found " + type_name(so));
  if (!r.stream) fail("stream_options", "only allowed with \"stream\": true");
  bool usage_given = false;
  for (const auto& [key, v] : so.items()) {
    if (key != "include_usage" && key != "continuous_usage_stats") fail("stream_options." + key, "unknown field");
    if (v.is_null()) continue;
    if (key == "include_usage") {
      r.include_usage = boolean(v, "stream_options.include_usage");
      usage_given = true;
    } else {
      r.continuous_usage_stats = boolean(v, "stream_options.continuous_usage_stats");
    }
  }
  if (r.continuous_usage_stats && !usage_given) r.include_usage = true;
  if (!r.include_usage) r.continuous_usage_stats = false;  // vLLM: continuous usage needs include_usage
}

CompletionRequest parse(Endpoint ep, const json& body, std::string_view served_model) {
  if (!body.is_object()) fail("body", "expected a JSON object, found " + type_name(body));
  check_field_names(ep, body);
  CompletionRequest r;
  r.endpoint = ep;
  auto has = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  if (has("model")) r.model = string(body["model"], "model");
  else if (!served_model.empty()) r.model = std::string(served_model);
  else fail("model", "missing");
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
      r.top_logprobs = static_cast<std::uint32_t>(integer(body["top_logprobs"], "top_logprobs", 0, shard::max_top_logprobs));
      if (!r.logprobs) fail("top_logprobs", "needs \"logprobs\": true");
    }
  }
  if (has("presence_penalty")) r.presence_penalty = static_cast<float>(number(body["presence_penalty"], "presence_penalty", -2, 2));
  if (has("frequency_penalty")) r.frequency_penalty = static_cast<float>(number(body["frequency_penalty"], "frequency_penalty", -2, 2));
  if (has("user")) r.user = string(body["user"], "user");
  if (has("priority")) r.priority = static_cast<std::int32_t>(integer(body["priority"], "priority", -1'000'000, 1'000'000));
  if (has("stream")) r.stream = boolean(body["stream"], "stream");
  if (has("stream_options")) parse_stream_options(body["stream_options"], r);
  parse_extensions(body, r);
  if (ep == Endpoint::chat) parse_chat_template(body, r);
  return r;
}

}  // namespace

std::variant<json, ApiError> read_json_body(std::string_view body) {
  if (auto refused = check_json_body(body)) return *refused;  // bad UTF-8, depth, numbers, duplicate keys
  try {
    return json::parse(body);
  } catch (const json::parse_error& e) {
    return ApiError{400, std::string("the body is not valid JSON: ") + e.what(), "invalid_request_error", "", "invalid_json"};
  }
}

std::variant<CompletionRequest, ApiError> parse_request_document(Endpoint ep, const json& body,
                                                                 std::string_view served_model) {
  try {
    return parse(ep, body, served_model);
  } catch (const Bad& b) {
    return b.error;
  }
}

std::variant<CompletionRequest, ApiError> parse_request(Endpoint ep, std::string_view body, std::string_view served_model) {
  auto doc = read_json_body(body);
  if (auto* e = std::get_if<ApiError>(&doc)) return *e;
  return parse_request_document(ep, std::get<json>(doc), served_model);
}

std::optional<ApiError> model_not_served(std::string_view asked, std::string_view served, std::string_view also) {
  if (asked == served || (!also.empty() && asked == also)) return std::nullopt;
  return ApiError{404, "model: \"" + std::string(asked) + "\" is not served here; this server serves \"" + std::string(served) + "\"",
                  "invalid_request_error", "model", "model_not_found"};
}

}  // namespace actorlm::http
