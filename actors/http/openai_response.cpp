#include "actors/http/openai_response.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>

namespace actorlm::http {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json bytes_of(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(int(c));
  return a;
}

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
json completion_logprobs(const std::vector<TokenLogprob>& lps, std::size_t offset) {
  json tokens = json::array(), logprobs = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& lp : lps) {
    tokens.push_back(lp.token);
    logprobs.push_back(lp.unconditioned ? json(nullptr) : json(lp.logprob));
    json top = json::object();
    for (const auto& [t, l] : lp.top) top[t] = l;
    tops.push_back(lp.top.empty() ? json(nullptr) : top);
    offsets.push_back(offset);
    offset += lp.token.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json chat_logprobs(const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const auto& lp : lps) {
    json top = json::array();
    for (const auto& [t, l] : lp.top) top.push_back({{"token", t}, {"logprob", l}, {"bytes", bytes_of(t)}});
    content.push_back({{"token", lp.token}, {"logprob", lp.logprob}, {"bytes", bytes_of(lp.token)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// vLLM's prompt_logprobs: null for the prompt's first token, then per token an object of token
// ids (as strings) to {"logprob", "rank", "decoded_token"}: the token itself and its k most
// likely alternatives (ranks 1 .. k; a token among them keeps its own rank). A log-probability
// of -inf is written -9999.0, as vLLM clamps it (JSON has no infinity).
json prompt_logprobs_json(const std::vector<PromptTokenScore>& scores) {
  const auto finite = [](float lp) { return std::isinf(lp) && lp < 0 ? -9999.0f : lp; };
  json out = json::array({nullptr});
  for (const auto& s : scores) {
    json entry = json::object();
    for (std::size_t k = 0; k < s.top.size(); ++k)
      entry[std::to_string(s.top[k].token)] = {
          {"logprob", finite(s.top[k].logprob)}, {"rank", k + 1}, {"decoded_token", s.top[k].text}};
    entry[std::to_string(s.token)] = {{"logprob", finite(s.logprob)}, {"rank", s.rank}, {"decoded_token", s.text}};
    out.push_back(std::move(entry));
  }
  return out;
}

json usage_json(Usage u) {
  json out{{"prompt_tokens", u.prompt_tokens}, {"completion_tokens", u.completion_tokens},
           {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.cached_tokens) out["prompt_tokens_details"] = {{"cached_tokens", *u.cached_tokens}};
  return out;
}

json envelope(const ResponseMeta& m, const char* object) {
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}

}  // namespace

std::string completion_json(const ResponseMeta& m, const std::vector<ChoiceResult>& choices, bool logprobs, Usage u) {
  const bool chat = m.endpoint == Endpoint::chat;
  json out = envelope(m, chat ? "chat.completion" : "text_completion");
  json list = json::array();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    json choice{{"index", i}, {"finish_reason", c.finish_reason}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      choice["logprobs"] = logprobs ? chat_logprobs(c.logprobs) : json(nullptr);
    } else {
      choice["text"] = c.text;
      choice["logprobs"] = logprobs ? completion_logprobs(c.logprobs, 0) : json(nullptr);
      if (c.prompt_logprobs) choice["prompt_logprobs"] = prompt_logprobs_json(*c.prompt_logprobs);
    }
    list.push_back(std::move(choice));
  }
  out["choices"] = std::move(list);
  if (chat && !choices.empty() && choices.front().prompt_logprobs)
    out["prompt_logprobs"] = prompt_logprobs_json(*choices.front().prompt_logprobs);
  out["usage"] = usage_json(u);
  return dump(out);
}

std::string chunk_json(const ResponseMeta& m, const ChoiceDelta& d, bool logprobs, bool include_usage, bool role_chunk) {
  const bool chat = m.endpoint == Endpoint::chat;
  json out = envelope(m, chat ? "chat.completion.chunk" : "text_completion");
  json choice{{"index", d.index}};
  if (chat) {
    if (role_chunk) choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    else if (d.text.empty() && d.finish_reason) choice["delta"] = json::object();
    else choice["delta"] = {{"content", d.text}};
    choice["logprobs"] = logprobs && !role_chunk ? chat_logprobs(d.logprobs) : json(nullptr);
  } else {
    choice["text"] = d.text;
    choice["logprobs"] = logprobs ? completion_logprobs(d.logprobs, 0) : json(nullptr);
  }
  choice["finish_reason"] = d.finish_reason && !role_chunk ? json(*d.finish_reason) : json(nullptr);
  out["choices"] = json::array({choice});
  if (d.usage) out["usage"] = usage_json(role_chunk ? Usage{d.usage->prompt_tokens, 0, std::nullopt} : *d.usage);
  else if (include_usage) out["usage"] = nullptr;
  return dump(out);
}

std::string usage_chunk_json(const ResponseMeta& m, Usage u) {
  json out = envelope(m, m.endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(u);
  return dump(out);
}

namespace {

void append_number(std::string& out, std::uint64_t x) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  out.append(buf, r.ptr);
}

// A JSON string as dump() writes it: plain printable ASCII copied between quotes, anything else
// (quotes, backslashes, control bytes, UTF-8, invalid bytes replaced by U+FFFD) escaped by nlohmann.
void append_string(std::string& out, const std::string& s) {
  for (const unsigned char c : s)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      out += dump(json(s));
      return;
    }
  out += '"';
  out += s;
  out += '"';
}

}  // namespace

StreamChunks::StreamChunks(ResponseMeta meta, bool include_usage)
    : meta_(std::move(meta)), include_usage_(include_usage) {
  // json's objects keep their keys sorted: choices, created, id, model, object, usage.
  tail_ = ",\"created\":" + dump(json(meta_.created)) + ",\"id\":" + dump(json(meta_.id)) +
          ",\"model\":" + dump(json(meta_.model)) + ",\"object\":" +
          (meta_.endpoint == Endpoint::chat ? "\"chat.completion.chunk\"" : "\"text_completion\"");
}

void StreamChunks::append_event(std::string& out, const ChoiceDelta& d, bool logprobs, bool role_chunk) const {
  const bool chat = meta_.endpoint == Endpoint::chat;
  out += "data: ";
  if (logprobs && !(chat && role_chunk)) {
    out += chunk_json(meta_, d, logprobs, include_usage_, role_chunk);
    out += "\n\n";
    return;
  }
  out += "{\"choices\":[{";
  if (chat) {
    if (role_chunk) out += "\"delta\":{\"content\":\"\",\"role\":\"assistant\"}";
    else if (d.text.empty() && d.finish_reason) out += "\"delta\":{}";
    else {
      out += "\"delta\":{\"content\":";
      append_string(out, d.text);
      out += '}';
    }
    out += ',';
  }
  out += "\"finish_reason\":";
  if (d.finish_reason && !role_chunk) append_string(out, *d.finish_reason);
  else out += "null";
  out += ",\"index\":";
  append_number(out, d.index);
  out += ",\"logprobs\":null";
  if (!chat) {
    out += ",\"text\":";
    append_string(out, d.text);
  }
  out += "}]";
  out += tail_;
  if (d.usage) {
    const Usage u = role_chunk ? Usage{d.usage->prompt_tokens, 0, std::nullopt} : *d.usage;
    out += ",\"usage\":{\"completion_tokens\":";
    append_number(out, u.completion_tokens);
    out += ",\"prompt_tokens\":";
    append_number(out, u.prompt_tokens);
    if (u.cached_tokens) {
      out += ",\"prompt_tokens_details\":{\"cached_tokens\":";
      append_number(out, *u.cached_tokens);
      out += '}';
    }
    out += ",\"total_tokens\":";
    append_number(out, u.prompt_tokens + u.completion_tokens);
    out += '}';
  } else if (include_usage_) {
    out += ",\"usage\":null";
  }
  out += "}\n\n";
}

}  // namespace actorlm::http
