#pragma once
// One input of the request-parser fuzzer: how its bytes become an endpoint and a body, and what
// parse_request must do with that body. Shared by the libFuzzer target (request_fuzzer.cpp) and
// the corpus replay test (tests/actors/http/request_fuzz_corpus_test.cpp), so that a corpus file
// means the same body to both. The first byte chooses:
//   'c', 'h'  the rest is the body as it is, for /v1/completions or /v1/chat/completions (seeds
//             stay readable: c{"model":"m","prompt":"x"});
//   other     the rest drives a generator that writes an object with the real field names and
//             values of every type, plausible ones most often so that parsing goes deep, and
//             breaks it the ways bodies break: bad UTF-8 in strings and keys, a key given twice,
//             deep nesting, numbers past 64 bits or a double, bad escapes, a cut; bit 0 of the
//             first byte chooses the endpoint.
// A small byte reader stands in for libFuzzer's FuzzedDataProvider: the replay test is built by
// g++ in every build, where clang's header is absent, and must decode a file exactly alike.

#include "actors/http/openai_request.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace actorlm::fuzz {

class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ == end_; }
  std::uint8_t byte() { return empty() ? 0 : *p_++; }
  // A number in [0, n); 0 once the input is used up, so every loop and recursion ends.
  std::size_t below(std::size_t n) {
    if (n <= 1) return 0;
    std::size_t v = byte();
    if (n > 256) v = v << 8 | byte();
    return v % n;
  }
  bool chance(unsigned in_256) { return byte() < in_256; }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return v;
  }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

// What a field holds when it is plausible; anything else is written now and then instead.
enum class Shape { text, role, number, integer, boolean, prompt, messages, stop, token_ids, stream_options, logit_bias, any };

struct FieldName {
  const char* name;
  Shape shape;
};

// Both endpoints' fields (the first kCoreFields: OpenAI's), then vLLM's extensions (issue 14)
// so that they are fuzzed once parsed, then names that belong elsewhere.
inline constexpr std::size_t kCoreFields = 20;
inline constexpr std::array<FieldName, 39> kFields = {{
    {"model", Shape::text}, {"prompt", Shape::prompt}, {"messages", Shape::messages},
    {"max_tokens", Shape::integer}, {"max_completion_tokens", Shape::integer}, {"temperature", Shape::number},
    {"top_p", Shape::number}, {"top_k", Shape::integer}, {"min_p", Shape::number}, {"n", Shape::integer},
    {"stop", Shape::stop}, {"seed", Shape::integer}, {"logprobs", Shape::integer}, {"top_logprobs", Shape::integer},
    {"presence_penalty", Shape::number}, {"frequency_penalty", Shape::number}, {"user", Shape::text},
    {"priority", Shape::integer}, {"stream", Shape::boolean}, {"stream_options", Shape::stream_options},
    {"ignore_eos", Shape::boolean}, {"min_tokens", Shape::integer}, {"stop_token_ids", Shape::token_ids},
    {"include_stop_str_in_output", Shape::boolean}, {"skip_special_tokens", Shape::boolean},
    {"spaces_between_special_tokens", Shape::boolean}, {"repetition_penalty", Shape::number},
    {"return_tokens_as_token_ids", Shape::boolean}, {"add_special_tokens", Shape::boolean}, {"echo", Shape::boolean},
    {"logit_bias", Shape::logit_bias}, {"best_of", Shape::integer}, {"truncate_prompt_tokens", Shape::integer},
    {"prompt_logprobs", Shape::integer}, {"add_generation_prompt", Shape::boolean},
    {"continue_final_message", Shape::boolean}, {"chat_template_kwargs", Shape::any}, {"role", Shape::text},
    {"content", Shape::text},
}};

inline constexpr std::array<const char*, 4> kRoles = {"system", "user", "assistant", "developer"};

inline constexpr std::array<const char*, 12> kWords = {
    "m", "", "user", "system", "assistant", "developer", "tool", "text", "image_url", "hello world", "\\n", "</s>"};

// Integer literals at and past every range a field has: 32-bit wraps, 64-bit ends, past 64 bits.
inline constexpr std::array<const char*, 24> kIntegers = {
    "0", "1", "-1", "2", "5", "6", "16", "20", "21", "128", "129", "-2", "1000000", "1000001", "16777216",
    "16777217", "2147483647", "2147483648", "4294967297", "9223372036854775807", "-9223372036854775808",
    "18446744073709551615", "18446744073709551616", "-99999999999999999999"};

inline constexpr std::array<const char*, 18> kNumbers = {
    "0", "0.0", "-0", "0.5", "1", "1.0", "2", "2.0000001", "-2", "-2.5", "1e-400", "1e400", "-1e400",
    "1.7976931348623157e308", "4.9e-324", "1E2", "0.9999999999999999", "1e19"};

// Escapes the lexer must take or refuse: surrogates, pairs, NUL, a bad escape, a cut one.
inline constexpr std::array<const char*, 10> kEscapes = {
    "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\u0000", "\\n", "\\\"", "\\x41", "\\u12", "\\ud800\\u0041", "\\/"};

class BodyWriter {
 public:
  explicit BodyWriter(ByteReader& in) : in_(in) {}

  // Random input bytes give a body that is whole three times in four, and whose fields are each
  // plausible most of the time, so that some get through every check.
  std::string body(http::Endpoint ep) {
    const std::uint8_t breaks = in_.byte();  // below 64: broken one of four ways
    out_ = "{";
    field("model", Shape::text);
    field(ep == http::Endpoint::chat ? "messages" : "prompt", ep == http::Endpoint::chat ? Shape::messages : Shape::prompt);
    std::uint64_t used = 0b111;  // fields written (model, prompt, messages first), one bit each, so
                                 // that none is written twice by chance
    for (std::size_t i = 0, n = in_.below(6); i < n; ++i) {
      const std::size_t k = in_.chance(192) ? in_.below(kCoreFields) : in_.below(kFields.size());
      if (used >> k & 1) continue;
      used |= std::uint64_t{1} << k;
      field(kFields[k].name, kFields[k].shape);
    }
    if (breaks < 16) field("model", Shape::text);  // a key twice
    if (breaks >= 16 && breaks < 32) {             // a field nested deeper than any limit
      const std::size_t depth = 50 + in_.below(100);
      out_ += ",\"chat_template_kwargs\":" + std::string(depth, '[') + std::string(depth, ']');
    }
    out_ += "}";
    if (breaks >= 32 && breaks < 48) out_.resize(in_.below(out_.size() + 1));  // a body cut short
    if (breaks >= 48 && breaks < 64) out_[in_.below(out_.size())] = static_cast<char>(in_.byte());  // a byte replaced
    return out_;
  }

 private:
  void field(const char* name, Shape shape) {
    if (out_.size() > 1) out_ += ',';
    key(name);
    out_ += ':';
    value(shape, 0);
  }

  void key(std::string_view name) {
    out_ += '"';
    out_ += name;
    if (in_.chance(4)) out_ += static_cast<char>(0x80 | in_.byte());  // bad UTF-8: no such byte stands alone
    out_ += '"';
  }

  void value(Shape shape, int depth) {
    if (depth > 6 || !in_.chance(24)) return plausible(shape, depth);
    any(depth);
  }

  void plausible(Shape shape, int depth) {
    switch (shape) {
      case Shape::text: return text();
      case Shape::role:
        if (in_.chance(16)) return text();
        out_ += std::string("\"") + kRoles[in_.below(kRoles.size())] + "\"";
        return;
      case Shape::number: out_ += kNumbers[in_.below(kNumbers.size())]; return;
      case Shape::integer: return integer();
      case Shape::boolean: out_ += in_.chance(128) ? "true" : "false"; return;
      case Shape::prompt: return prompt(depth);
      case Shape::messages: return messages(depth);
      case Shape::stop:
        if (in_.chance(100)) return text();
        return list([&] { text(); });
      case Shape::token_ids: return list([&] { integer(); });
      case Shape::stream_options:
        out_ += '{';
        key(in_.chance(160) ? "include_usage" : "continuous_usage_stats");
        out_ += ':';
        value(Shape::boolean, depth + 1);
        out_ += '}';
        return;
      case Shape::logit_bias:
        return object([&] {
          key(std::to_string(in_.below(70000)));
          out_ += ':';
          value(Shape::number, depth + 1);
        });
      case Shape::any: return any(depth);
    }
  }

  void prompt(int depth) {
    switch (in_.below(4)) {
      case 0: return text();
      case 1: return list([&] { value(Shape::text, depth + 1); });
      case 2: return list([&] { integer(); });
      default: return list([&] { list([&] { integer(); }); });
    }
  }

  void messages(int depth) {
    list([&] {
      out_ += '{';
      key("role");
      out_ += ':';
      value(Shape::role, depth + 2);
      out_ += ',';
      key("content");
      out_ += ':';
      if (in_.chance(160)) {
        value(Shape::text, depth + 2);
      } else {
        list([&] {
          out_ += '{';
          key("type");
          out_ += ":\"text\",";
          key("text");
          out_ += ':';
          value(Shape::text, depth + 3);
          out_ += '}';
        });
      }
      if (in_.chance(30)) {
        out_ += ',';
        key(in_.chance(128) ? "name" : "tool_calls");
        out_ += ':';
        value(Shape::text, depth + 2);
      }
      out_ += '}';
    });
  }

  // A value of a random type, nested at most a few levels.
  void any(int depth) {
    switch (in_.below(depth > 4 ? 5 : 7)) {
      case 0: out_ += "null"; return;
      case 1: out_ += in_.chance(128) ? "true" : "false"; return;
      case 2: return integer();
      case 3: out_ += kNumbers[in_.below(kNumbers.size())]; return;
      case 4: return text();
      case 5: return list([&] { any(depth + 1); });
      default:
        return object([&] {
          key(kFields[in_.below(kFields.size())].name);
          out_ += ':';
          any(depth + 1);
        });
    }
  }

  void integer() {
    if (in_.chance(200)) {
      out_ += kIntegers[in_.below(kIntegers.size())];
    } else {
      out_ += std::to_string(static_cast<std::int64_t>(in_.u64()));
    }
  }

  // A string: a word, printable ASCII, raw bytes (so bad UTF-8 and control characters go
  // through), or escapes; quotes and backslashes escaped so that the string ends where meant.
  void text() {
    out_ += '"';
    const std::uint8_t kind = in_.byte();
    if (kind < 176) {
      out_ += kWords[in_.below(kWords.size())];
    } else if (kind < 248) {
      for (std::size_t i = 0, n = in_.below(24); i < n; ++i) {
        const char c = static_cast<char>(kind < 240 ? 0x20 + in_.below(0x5f) : in_.byte());
        if (c == '"' || c == '\\') out_ += '\\';
        out_ += c;
      }
    } else {
      for (std::size_t i = 0, n = 1 + in_.below(3); i < n; ++i) out_ += kEscapes[in_.below(kEscapes.size())];
    }
    out_ += '"';
  }

  template <class Element>
  void list(Element element) {
    out_ += '[';
    for (std::size_t i = 0, n = in_.below(5); i < n; ++i) {
      if (i) out_ += ',';
      element();
    }
    out_ += ']';
  }

  template <class Member>
  void object(Member member) {
    out_ += '{';
    for (std::size_t i = 0, n = in_.below(4); i < n; ++i) {
      if (i) out_ += ',';
      member();
    }
    out_ += '}';
  }

  ByteReader& in_;
  std::string out_;
};

struct RequestInput {
  http::Endpoint endpoint;
  std::string body;
};

inline RequestInput request_input(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return {http::Endpoint::completions, ""};
  const std::uint8_t mode = data[0];
  if (mode == 'c' || mode == 'h') {
    return {mode == 'h' ? http::Endpoint::chat : http::Endpoint::completions,
            std::string(reinterpret_cast<const char*>(data + 1), size - 1)};
  }
  ByteReader in(data + 1, size - 1);
  const http::Endpoint ep = mode & 1 ? http::Endpoint::chat : http::Endpoint::completions;
  return {ep, BodyWriter(in).body(ep)};
}

// What parse_request broke on this body, empty when nothing: a refusal is a 400 whose message
// names its field first and holds only valid UTF-8 (it is quoted back to the client); a request
// it accepts has every value in its documented range. An exception escaping is a finding too
// (the fuzzer aborts on it; the replay test reports it).
inline std::string request_property_violation(http::Endpoint ep, std::string_view body) {
  const auto parsed = http::parse_request(ep, body);
  if (const auto* e = std::get_if<http::ApiError>(&parsed)) {
    if (e->status != 400) return "status " + std::to_string(e->status) + " for a bad body";
    if (e->message.empty()) return "an error without a message";
    if (!e->param.empty() && e->message.rfind(e->param + ": ", 0) != 0) return "the message does not start with its param";
    try {
      (void)nlohmann::json{{"message", e->message}, {"param", e->param}}.dump();  // strict: throws on bad UTF-8
      if (nlohmann::json::parse(e->to_json())["error"]["message"] != e->message) return "to_json changed the message";
    } catch (const nlohmann::json::exception& x) {
      return std::string("the error does not render: ") + x.what();
    }
    return "";
  }
  const auto& r = std::get<http::CompletionRequest>(parsed);
  const auto in = [](double x, double lo, double hi) { return x >= lo && x <= hi; };
  if (ep == http::Endpoint::completions ? r.prompts.empty() : r.messages.empty()) return "accepted without a prompt";
  if (r.max_tokens && !in(*r.max_tokens, 1, 1 << 24)) return "max_tokens out of range";
  if (!in(r.temperature, 0, 2) || !(r.top_p > 0 && r.top_p <= 1) || !in(r.min_p, 0, 1)) return "a sampling value out of range";
  if (!in(r.n, 1, 128) || r.top_logprobs > 20 || r.stop.size() > 16 || r.top_k < 0) return "a count out of range";
  if (!in(r.presence_penalty, -2, 2) || !in(r.frequency_penalty, -2, 2)) return "a penalty out of range";
  return "";
}

}  // namespace actorlm::fuzz
