#include "actors/http/tokenize.hpp"

#include "actors/http/json_guard.hpp"
#include "actors/http/openai_request.hpp"
#include "actors/http/request_spec.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <iterator>
#include <set>

namespace actorlm::http {

using nlohmann::json;

namespace {

// The body as a JSON object, read as the /v1 endpoints read theirs, each key checked against
// `allowed`. A field given as null is absent, as on /v1 (and vLLM's Optional fields).
std::variant<json, ApiError> read_body(std::string_view body, const std::set<std::string>& allowed,
                                       const char* endpoint) {
  auto read = read_json_body(body);
  if (auto* e = std::get_if<ApiError>(&read)) return *e;
  json doc = std::move(std::get<json>(read));
  if (!doc.is_object()) return bad_field("", std::string("the body must be a JSON object"));
  for (auto it = doc.begin(); it != doc.end();) it = it->is_null() ? doc.erase(it) : std::next(it);
  for (const auto& [key, _] : doc.items())
    if (!allowed.count(key)) return bad_field(key, key + ": unknown or unsupported field for " + endpoint);
  return doc;
}

}  // namespace

std::variant<std::string, ApiError> tokenize_json(std::string_view body, const TokenizeContext& ctx) {
  static const std::set<std::string> completion = {"model", "prompt", "add_special_tokens", "return_token_strs"};
  static const std::set<std::string> chat = {"model",          "messages",          "add_generation_prompt",
                                             "continue_final_message", "chat_template_kwargs",
                                             "add_special_tokens",     "return_token_strs"};
  std::set<std::string> either = completion;
  either.insert(chat.begin(), chat.end());
  auto read = read_body(body, either, "/tokenize");
  if (auto* e = std::get_if<ApiError>(&read)) return *e;
  json doc = std::move(std::get<json>(read));
  // "messages" makes it a chat prompt; the other kind's fields are then refused.
  const bool is_chat = doc.contains("messages");
  for (const auto& [key, _] : doc.items())
    if (!(is_chat ? chat : completion).count(key))
      return bad_field(key, key + ": not with " + (is_chat ? "\"messages\"" : "\"prompt\"") + " in /tokenize");
  bool token_strs = false;
  if (doc.contains("return_token_strs")) {
    if (!doc["return_token_strs"].is_boolean()) return bad_field("return_token_strs", "return_token_strs: expected a boolean");
    token_strs = doc["return_token_strs"].get<bool>();
    doc.erase("return_token_strs");
  }
  if (!is_chat && !doc.contains("prompt")) return bad_field("prompt", "prompt: required (or \"messages\")");
  // The same reading as the completion endpoints, so the count is what they will count.
  auto parsed = parse_request_document(is_chat ? Endpoint::chat : Endpoint::completions, doc, ctx.served_name);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const auto& req = std::get<CompletionRequest>(parsed);
  if (auto e = model_not_served(req.model, ctx.served_name, ctx.response_name)) return *e;
  if (req.prompts.size() > 1) return bad_field("prompt", "prompt: one prompt per call, found " + std::to_string(req.prompts.size()));
  auto inputs = prompt_inputs(req, ctx.codec, ctx.vocab_size, ctx.max_model_len);
  if (auto* e = std::get_if<ApiError>(&inputs)) return *e;
  const auto& tokens = std::get<std::vector<PromptInput>>(inputs).at(0).tokens;
  json out{{"count", tokens.size()}, {"max_model_len", ctx.max_model_len}, {"tokens", tokens}, {"token_strs", nullptr}};
  if (token_strs) {
    json strs = json::array();
    for (const auto t : tokens) strs.push_back(ctx.codec.token_piece(t));
    out["token_strs"] = std::move(strs);
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::variant<std::string, ApiError> detokenize_json(std::string_view body, const TokenizeContext& ctx) {
  auto read = read_body(body, {"model", "tokens"}, "/detokenize");
  if (auto* e = std::get_if<ApiError>(&read)) return *e;
  const json& doc = std::get<json>(read);
  if (doc.contains("model")) {
    if (!doc["model"].is_string()) return bad_field("model", "model: expected a string");
    if (auto e = model_not_served(doc["model"].get<std::string>(), ctx.served_name, ctx.response_name)) return *e;
  }
  if (!doc.contains("tokens") || !doc["tokens"].is_array())
    return bad_field("tokens", "tokens: expected an array of token ids");
  std::vector<serving::Token> ids;
  for (std::size_t i = 0; i < doc["tokens"].size(); ++i) {
    const auto& v = doc["tokens"][i];
    // Integers, and floats with an integral value (as /v1 and pydantic take them).
    const double x = v.is_number() ? v.get<double>() : -1;
    if (!v.is_number() || x < 0 || x >= double(ctx.vocab_size) || x != std::floor(x))
      return bad_field("tokens", "tokens[" + std::to_string(i) + "]: expected a token id in [0, " +
                                     std::to_string(ctx.vocab_size) + "), found " + quote_safely(v.dump(), 40));
    ids.push_back(static_cast<serving::Token>(x));
  }
  auto detok = ctx.codec.detokenizer(false);  // special tokens written out, as HF's decode
  std::string text;
  for (const auto t : ids) text += detok->push(t);
  text += detok->flush();
  return json{{"prompt", text}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace actorlm::http
