#include "model/format/safetensors_file.hpp"

#include "model/format/dequantize.hpp"
#include "model/format/mapped_file.hpp"
#include "model/format/shape_text.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

namespace actorlm::model {

namespace {

using json = nlohmann::json;

constexpr int kMaxJsonDepth = 64;  // the header is two levels deep; anything deeper is hostile

std::optional<DType> dtype_of(const std::string& s) {
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  return std::nullopt;
}

// A non-negative integer that fits in int64, or std::nullopt.
std::optional<std::int64_t> index_value(const json& j) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<std::int64_t>(u);
  }
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return j.get<std::int64_t>();
  return std::nullopt;
}

struct Entry {
  TensorInfo info;
  std::uint64_t begin = 0, end = 0;  // data_offsets, relative to the data area
};

class HeaderReader {
 public:
  HeaderReader(const std::string& path, std::uint64_t data_size)
      : path_(path), data_size_(data_size) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw ModelFileError(path_ + ": " + what);
  }

  Entry entry(const std::string& name, const json& j) const {
    const std::string who = "tensor '" + name + "'";
    if (!j.is_object()) fail(who + ": header entry is not an object");
    Entry e;
    e.info.name = name;

    const auto dt = j.find("dtype");
    if (dt == j.end() || !dt->is_string()) fail(who + ": dtype is missing or not a string");
    const auto dtype = dtype_of(dt->get<std::string>());
    if (!dtype) {
      fail(who + " has dtype " + dt->get<std::string>() +
           ", which is not supported (F32, F16, BF16)");
    }
    e.info.dtype = *dtype;

    const auto sh = j.find("shape");
    if (sh == j.end() || !sh->is_array()) fail(who + ": shape is missing or not an array");
    for (const json& d : *sh) {
      const auto v = index_value(d);
      if (!v) fail(who + ": shape " + sh->dump() + " is not a list of non-negative integers");
      e.info.shape.push_back(*v);
    }
    std::int64_t numel = 1;
    for (const std::int64_t d : e.info.shape) {
      if (d != 0 && numel > std::numeric_limits<std::int64_t>::max() / d) {
        fail(who + ": shape " + detail::shape_text(e.info.shape) + " has more than 2^63 elements");
      }
      numel *= d;
    }
    const auto bytes = storage_bytes(*dtype, numel);
    if (!bytes) {
      fail(who + ": shape " + detail::shape_text(e.info.shape) + " of " +
           std::string(dtype_name(*dtype)) + " needs more than 2^64 bytes");
    }
    const std::uint64_t need = *bytes;

    const auto off = j.find("data_offsets");
    if (off == j.end() || !off->is_array() || off->size() != 2 || !index_value((*off)[0]) ||
        !index_value((*off)[1])) {
      fail(who + ": data_offsets is not a pair of non-negative integers");
    }
    e.begin = static_cast<std::uint64_t>(*index_value((*off)[0]));
    e.end = static_cast<std::uint64_t>(*index_value((*off)[1]));
    const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ")";
    if (e.begin > e.end) fail(who + ": data_offsets " + range + " end before they begin");
    if (e.end > data_size_) {
      fail(who + ": data_offsets " + range + " past end of the data area (" +
           std::to_string(data_size_) + " bytes)");
    }
    if (e.end - e.begin != need) {
      fail(who + ": data_offsets " + range + " hold " + std::to_string(e.end - e.begin) +
           " bytes, but shape " + detail::shape_text(e.info.shape) + " of " +
           std::string(dtype_name(*dtype)) + " needs " + std::to_string(need));
    }
    e.info.nbytes = need;
    return e;
  }

 private:
  const std::string& path_;
  std::uint64_t data_size_;
};

json parse_header(const std::string& path, const char* begin, const char* end) {
  // Reject deep nesting while parsing, before any recursive walk over the result.
  const json::parser_callback_t limit_depth = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) {
      throw ModelFileError(path + ": header nests deeper than " + std::to_string(kMaxJsonDepth));
    }
    return true;
  };
  try {
    return json::parse(begin, end, limit_depth);
  } catch (const json::exception& e) {
    throw ModelFileError(path + ": header is not valid JSON: " + e.what());
  }
}

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const detail::Mapping m = detail::map_file(path);
  f->data_ = m.data;
  f->size_ = m.size;  // from here the destructor unmaps, whatever throws below

  const auto fail = [&](const std::string& what) { throw ModelFileError(path + ": " + what); };
  if (f->size_ < 8) {
    fail("truncated: " + std::to_string(f->size_) +
         " bytes, too short for the 8-byte header length");
  }
  std::uint64_t header_len;
  std::memcpy(&header_len, f->data_, 8);
  if (header_len > f->size_ - 8) {
    fail("header length " + std::to_string(header_len) + " is past end of file (size " +
         std::to_string(f->size_) + ")");
  }
  const auto* text = reinterpret_cast<const char*>(f->data_ + 8);
  const json header = parse_header(path, text, text + header_len);
  if (!header.is_object()) fail("header is not a JSON object");

  const std::uint64_t data_start = 8 + header_len;
  const HeaderReader reader(f->path_, f->size_ - data_start);
  std::vector<Entry> entries;
  for (const auto& [name, j] : header.items()) {
    if (name == "__metadata__") continue;  // free-form strings; nothing here needs them
    entries.push_back(reader.entry(name, j));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin == e.end) continue;
    if (prev != nullptr && e.begin < prev->end) {
      fail("tensors '" + prev->info.name + "' [" + std::to_string(prev->begin) + ", " +
           std::to_string(prev->end) + ") and '" + e.info.name + "' [" +
           std::to_string(e.begin) + ", " + std::to_string(e.end) + ") overlap");
    }
    prev = &e;
  }
  f->tensors_.reserve(entries.size());
  for (Entry& e : entries) {
    e.info.offset = data_start + e.begin;
    f->tensors_.push_back(std::move(e.info));
  }
  return f;
}

SafetensorsFile::~SafetensorsFile() { detail::unmap_file({data_, size_}); }

void SafetensorsFile::read_into(const TensorInfo& info, std::span<float> out) const {
  dequantize(info.dtype, data_ + info.offset, out);
}

std::span<const std::byte> SafetensorsFile::stored_bytes(const TensorInfo& info) const {
  return {data_ + info.offset, static_cast<std::size_t>(info.nbytes)};
}

}  // namespace actorlm::model
