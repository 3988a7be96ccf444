// GgufFile's typed metadata getters: absent keys are std::nullopt, a present key of another type
// is a ModelFileError naming the file, the key, what it is and what was expected.
#include "model/format/gguf_file.hpp"

#include "model/format/gguf_types.hpp"

#include <limits>

namespace actorlm::model {

namespace {

using T = GgufValue::Type;

bool is_integer(T t) {
  return t == T::u8 || t == T::i8 || t == T::u16 || t == T::i16 || t == T::u32 || t == T::i32 ||
         t == T::u64 || t == T::i64;
}

// "a string", "an array of i32", "an empty array".
std::string describe(const GgufValue& v) {
  if (v.type != T::array) {
    const std::string_view n = detail::gguf_value_type_name(v.type);
    return (n.front() == 'i' || n.front() == 'f' ? "an " : "a ") +
           std::string(n);
  }
  const auto& items = std::get<std::vector<GgufValue>>(v.value);
  if (items.empty()) return "an empty array";
  return "an array of " + std::string(detail::gguf_value_type_name(items.front().type));
}

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const GgufValue& v,
                             const char* expected) {
  throw ModelFileError(path + ": metadata '" + std::string(key) + "' is " + describe(v) +
                       ", expected " + expected);
}

// std::nullopt when `v` is not an integer; a ModelFileError when it is one beyond int64.
std::optional<std::int64_t> as_int(const std::string& path, std::string_view key,
                                   const GgufValue& v) {
  if (!is_integer(v.type)) return std::nullopt;
  if (const auto* u = std::get_if<std::uint64_t>(&v.value)) {
    if (*u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw ModelFileError(path + ": metadata '" + std::string(key) + "' value " +
                           std::to_string(*u) + " does not fit in a signed 64-bit integer");
    }
    return static_cast<std::int64_t>(*u);
  }
  return std::get<std::int64_t>(v.value);
}

// f32, f64 or any integer as a double; std::nullopt for other types.
std::optional<double> as_number(const GgufValue& v) {
  if (v.type == T::f32 || v.type == T::f64) return std::get<double>(v.value);
  if (const auto* u = std::get_if<std::uint64_t>(&v.value)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<std::int64_t>(&v.value)) return static_cast<double>(*i);
  return std::nullopt;
}

const GgufValue* lookup(const std::map<std::string, GgufValue, std::less<>>& m,
                        std::string_view key) {
  const auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

// The elements of array `key` converted by `convert` (std::nullopt: not of the expected kind).
template <class Out, class Convert>
std::optional<std::vector<Out>> array_of(const std::string& path, std::string_view key,
                                         const GgufValue* v, const char* expected,
                                         Convert convert) {
  if (v == nullptr) return std::nullopt;
  if (v->type != T::array) wrong_type(path, key, *v, expected);
  const auto& items = std::get<std::vector<GgufValue>>(v->value);
  std::vector<Out> out;
  out.reserve(items.size());
  for (const GgufValue& item : items) {
    std::optional<Out> x = convert(item);
    if (!x) wrong_type(path, key, *v, expected);
    out.push_back(std::move(*x));
  }
  return out;
}

}  // namespace

std::optional<std::int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = lookup(metadata_, key);
  if (v == nullptr) return std::nullopt;
  if (auto i = as_int(path_, key, *v)) return i;
  wrong_type(path_, key, *v, "an integer");
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = lookup(metadata_, key);
  if (v == nullptr) return std::nullopt;
  if (auto x = as_number(*v)) return x;
  wrong_type(path_, key, *v, "a number");
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = lookup(metadata_, key);
  if (v == nullptr) return std::nullopt;
  if (v->type != T::boolean) wrong_type(path_, key, *v, "a bool");
  return std::get<bool>(v->value);
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = lookup(metadata_, key);
  if (v == nullptr) return std::nullopt;
  if (v->type != T::string) wrong_type(path_, key, *v, "a string");
  return std::get<std::string>(v->value);
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  return array_of<std::string>(path_, key, lookup(metadata_, key), "an array of strings",
                               [](const GgufValue& e) -> std::optional<std::string> {
                                 if (e.type != T::string) return std::nullopt;
                                 return std::get<std::string>(e.value);
                               });
}

std::optional<std::vector<std::int64_t>> GgufFile::get_int_array(std::string_view key) const {
  return array_of<std::int64_t>(path_, key, lookup(metadata_, key), "an array of integers",
                                [&](const GgufValue& e) { return as_int(path_, key, e); });
}

std::optional<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  return array_of<double>(path_, key, lookup(metadata_, key), "an array of numbers",
                          as_number);
}

}  // namespace actorlm::model
