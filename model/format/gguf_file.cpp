#include "model/format/gguf_file.hpp"

#include "model/format/dequantize.hpp"
#include "model/format/gguf_types.hpp"
#include "model/format/mapped_file.hpp"
#include "model/format/shape_text.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace actorlm::model {

namespace {

constexpr std::uint64_t kDefaultAlignment = 32;      // GGUF_DEFAULT_ALIGNMENT
constexpr std::uint64_t kMaxAlignment = 1ull << 32;  // general.alignment is a u32 in ggml
constexpr int kMaxArrayDepth = 8;                    // arrays of arrays of ...
constexpr std::uint32_t kMaxDims = 4;                // GGML_MAX_DIMS

// Smallest encodings, to bound counts by the bytes left before allocating anything:
// a metadata entry is a key (u64 length + at least 1 byte), a u32 type and a value of >= 1 byte;
// a tensor info a name (u64 length + >= 1 byte), u32 n_dims, u32 type and u64 offset.
constexpr std::uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 4 + 8;

std::uint64_t min_value_bytes(GgufValue::Type t) {
  using T = GgufValue::Type;
  switch (t) {
    case T::u8: case T::i8: case T::boolean: return 1;
    case T::u16: case T::i16: return 2;
    case T::u32: case T::i32: case T::f32: return 4;
    case T::u64: case T::i64: case T::f64: return 8;
    case T::string: return 8;      // its length
    case T::array: return 4 + 8;   // element type and count
  }
  return 1;
}

// Sequential little-endian reads from the mapped file; every read is checked against its end.
// `where` names what is being read ("tensor 'x'") so a truncation message can say so.
class Parser {
 public:
  Parser(const std::string& path, const std::byte* data, std::size_t size)
      : path_(path), data_(data), size_(size) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw ModelFileError(path_ + ": " + what);
  }

  std::size_t pos() const { return pos_; }
  std::uint64_t left() const { return size_ - pos_; }
  void set_where(std::string where) { where_ = std::move(where); }
  const std::string& where() const { return where_; }

  const std::byte* take(std::uint64_t n, const char* what) {
    if (n > left()) {
      fail("truncated at offset " + std::to_string(pos_) + " reading the " + what + " of " +
           where_ + " (" + std::to_string(n) + " bytes needed, file size " +
           std::to_string(size_) + ")");
    }
    const std::byte* p = data_ + pos_;
    pos_ += static_cast<std::size_t>(n);
    return p;
  }

  template <class T>
  T scalar(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }

  // GGUF string: u64 length, then that many bytes (not NUL-terminated).
  std::string string(const char* length_what, const char* what) {
    const auto n = scalar<std::uint64_t>(length_what);
    if (n > left()) {
      fail(std::string(what) + " of " + where_ + " has length " + std::to_string(n) +
           " at offset " + std::to_string(pos_ - 8) + ", more than the " + std::to_string(left()) +
           " bytes left in the file");
    }
    const auto* p = reinterpret_cast<const char*>(take(n, what));
    return std::string(p, static_cast<std::size_t>(n));
  }

  // A count of items of at least `min_bytes` each must fit in what is left of the file.
  void check_count(std::uint64_t count, std::uint64_t min_bytes, const char* what) const {
    if (count > left() / min_bytes) {
      fail(std::string(what) + " " + std::to_string(count) + " of " + where_ +
           " is more than the file can hold (" + std::to_string(left()) + " bytes left)");
    }
  }

  GgufValue::Type value_type(const char* what) {
    const auto t = scalar<std::uint32_t>(what);
    if (t > static_cast<std::uint32_t>(GgufValue::Type::f64)) {
      fail(where_ + " has unknown value type " + std::to_string(t));
    }
    return static_cast<GgufValue::Type>(t);
  }

  GgufValue value(GgufValue::Type type, int depth) {
    using T = GgufValue::Type;
    GgufValue v;
    v.type = type;
    switch (type) {
      case T::u8: v.value = std::uint64_t{scalar<std::uint8_t>("value")}; break;
      case T::u16: v.value = std::uint64_t{scalar<std::uint16_t>("value")}; break;
      case T::u32: v.value = std::uint64_t{scalar<std::uint32_t>("value")}; break;
      case T::u64: v.value = scalar<std::uint64_t>("value"); break;
      case T::i8: v.value = std::int64_t{scalar<std::int8_t>("value")}; break;
      case T::i16: v.value = std::int64_t{scalar<std::int16_t>("value")}; break;
      case T::i32: v.value = std::int64_t{scalar<std::int32_t>("value")}; break;
      case T::i64: v.value = scalar<std::int64_t>("value"); break;
      case T::f32: v.value = double{scalar<float>("value")}; break;
      case T::f64: v.value = scalar<double>("value"); break;
      case T::boolean: {
        const auto b = scalar<std::uint8_t>("value");
        if (b > 1) fail(where_ + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
        v.value = b == 1;
        break;
      }
      case T::string: v.value = string("string length", "string"); break;
      case T::array: {
        if (depth >= kMaxArrayDepth) {
          fail(where_ + ": arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
        }
        const T elem = value_type("array element type");
        const auto n = scalar<std::uint64_t>("array length");
        check_count(n, min_value_bytes(elem), "array length");
        std::vector<GgufValue> items;
        items.reserve(static_cast<std::size_t>(n));
        for (std::uint64_t i = 0; i < n; ++i) items.push_back(value(elem, depth + 1));
        v.value = std::move(items);
        break;
      }
    }
    return v;
  }

 private:
  const std::string& path_;
  const std::byte* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::string where_ = "the header";
};

std::string printable_magic(const std::byte* p) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const auto c = static_cast<unsigned char>(p[i]);
    s += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return s;
}

void check_version(Parser& p, std::uint32_t version) {
  if (version == 2 || version == 3) return;  // v2 and v3 differ only in v3 allowing big-endian
  std::string msg = "GGUF version " + std::to_string(version) + " is not supported (only 2 and 3)";
  if (version == 1) msg += "; version 1 files need converting with a current llama.cpp";
  const std::uint32_t swapped = (version >> 24) | ((version >> 8) & 0xff00u) |
                                ((version << 8) & 0xff0000u) | (version << 24);
  if (swapped == 2 || swapped == 3) msg += "; this looks like a big-endian file";
  p.fail(msg);
}

std::uint64_t alignment_of(const GgufFile& f, Parser& p) {
  const auto a = f.get_int("general.alignment");
  if (!a) return kDefaultAlignment;
  if (*a <= 0 || !std::has_single_bit(static_cast<std::uint64_t>(*a))) {
    p.fail("metadata 'general.alignment': " + std::to_string(*a) + " is not a power of two");
  }
  if (static_cast<std::uint64_t>(*a) > kMaxAlignment) {
    p.fail("metadata 'general.alignment': " + std::to_string(*a) + " is larger than 2^32");
  }
  return static_cast<std::uint64_t>(*a);
}

// One tensor info as stored, before its data range is known.
struct RawTensor {
  TensorInfo info;
  std::uint64_t rel_offset = 0;  // from the start of the data section
};

RawTensor read_tensor_info(Parser& p, std::uint64_t index) {
  RawTensor t;
  p.set_where("tensor info #" + std::to_string(index));
  t.info.name = p.string("name length", "name");
  if (t.info.name.empty()) p.fail(p.where() + " has an empty name");
  p.set_where("tensor '" + t.info.name + "'");

  const auto n_dims = p.scalar<std::uint32_t>("dimension count");
  if (n_dims > kMaxDims) {
    p.fail(p.where() + ": " + std::to_string(n_dims) + " dimensions (at most 4)");
  }
  std::vector<std::uint64_t> ne(n_dims);  // [n_dims], innermost first
  for (auto& d : ne) d = p.scalar<std::uint64_t>("dimensions");
  std::uint64_t numel = 1;
  const auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  for (const std::uint64_t d : ne) {
    if (d > max || (d != 0 && numel > max / d)) {
      std::string s = "[";
      for (std::size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
      p.fail(p.where() + ": ne " + s + "] has more than 2^63 elements");
    }
    numel *= d;
  }
  t.info.shape.assign(ne.rbegin(), ne.rend());

  const auto type = p.scalar<std::uint32_t>("type");
  const auto dtype = detail::dtype_of_ggml_type(type);
  if (!dtype) {
    const std::string_view name = detail::ggml_type_name(type);
    p.fail("unsupported tensor type " + std::to_string(type) +
           (name.empty() ? std::string() : " (" + std::string(name) + ")") + " for " + p.where());
  }
  t.info.dtype = *dtype;
  const std::int64_t block = block_elements(*dtype);
  const std::uint64_t row = ne.empty() ? 1 : ne[0];
  if (row % static_cast<std::uint64_t>(block) != 0) {
    p.fail(p.where() + ": row length " + std::to_string(row) + " is not a multiple of the " +
           std::string(dtype_name(*dtype)) + " block size " + std::to_string(block));
  }
  // Whole blocks and numel < 2^63; only the byte count can still overflow (f32: 2^65 bytes).
  // The bytes are checked against the file once the data section's start is known.
  const auto nbytes = storage_bytes(*dtype, static_cast<std::int64_t>(numel));
  if (!nbytes) {
    p.fail(p.where() + ": " + std::to_string(numel) + " " + std::string(dtype_name(*dtype)) +
           " values need more than 2^64 bytes");
  }
  t.info.nbytes = *nbytes;
  t.rel_offset = p.scalar<std::uint64_t>("data offset");
  return t;
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// Places each tensor's data in the file: aligned, inside it, and not overlapping another's.
void place_tensors(Parser& p, std::vector<RawTensor>& raw, std::uint64_t data_start,
                   std::uint64_t alignment, std::uint64_t file_size) {
  constexpr auto u64max = std::numeric_limits<std::uint64_t>::max();
  for (RawTensor& t : raw) {
    const std::string who = "tensor '" + t.info.name + "'";
    if (t.rel_offset % alignment != 0) {
      p.fail(who + ": data offset " + std::to_string(t.rel_offset) +
             " is not a multiple of the alignment " + std::to_string(alignment));
    }
    if (t.rel_offset > u64max - data_start) {
      p.fail(who + ": data offset " + std::to_string(t.rel_offset) + " is past end of file (size " +
             std::to_string(file_size) + ")");
    }
    const std::uint64_t begin = data_start + t.rel_offset;
    if (t.info.nbytes > u64max - begin || begin + t.info.nbytes > file_size) {
      const std::string end = t.info.nbytes > u64max - begin
                                  ? std::to_string(begin) + "+" + std::to_string(t.info.nbytes)
                                  : std::to_string(begin + t.info.nbytes);
      p.fail(who + ": data [" + std::to_string(begin) + ", " + end + ") past end of file (size " +
             std::to_string(file_size) + ")");
    }
    t.info.offset = begin;
  }
  std::vector<const TensorInfo*> order;
  for (const RawTensor& t : raw) {
    if (t.info.nbytes > 0) order.push_back(&t.info);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const TensorInfo& a = *order[i - 1];
    const TensorInfo& b = *order[i];
    if (b.offset < a.offset + a.nbytes) {
      p.fail("tensors '" + a.name + "' " + range_text(a.offset, a.offset + a.nbytes) + " and '" +
             b.name + "' " + range_text(b.offset, b.offset + b.nbytes) + " overlap");
    }
  }
}

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  const detail::Mapping m = detail::map_file(path);
  f->data_ = m.data;
  f->size_ = m.size;  // from here the destructor unmaps, whatever throws below

  Parser p(f->path_, f->data_, f->size_);
  const std::byte* magic = p.take(4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    p.fail("not a GGUF file (magic '" + printable_magic(magic) + "', expected 'GGUF')");
  }
  check_version(p, p.scalar<std::uint32_t>("version"));
  const auto n_tensors = p.scalar<std::uint64_t>("tensor count");
  const auto n_kv = p.scalar<std::uint64_t>("metadata count");
  p.check_count(n_kv, kMinKvBytes, "metadata count");
  p.check_count(n_tensors, kMinTensorInfoBytes, "tensor count");

  for (std::uint64_t i = 0; i < n_kv; ++i) {
    p.set_where("metadata #" + std::to_string(i));
    std::string key = p.string("key length", "key");
    if (key.empty()) p.fail(p.where() + " has an empty key");
    p.set_where("metadata '" + key + "'");
    if (f->metadata_.contains(key)) p.fail("duplicate " + p.where());
    const GgufValue::Type type = p.value_type("value type");
    f->metadata_.emplace(std::move(key), p.value(type, 0));
  }
  const std::uint64_t alignment = alignment_of(*f, p);

  std::vector<RawTensor> raw;
  raw.reserve(static_cast<std::size_t>(n_tensors));
  std::unordered_set<std::string> names;
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    raw.push_back(read_tensor_info(p, i));
    if (!names.insert(raw.back().info.name).second) {
      p.fail("duplicate tensor '" + raw.back().info.name + "'");
    }
  }
  // The data section starts at the next multiple of the alignment after the tensor infos.
  const std::uint64_t data_start = (p.pos() + alignment - 1) / alignment * alignment;
  place_tensors(p, raw, data_start, alignment, f->size_);
  f->tensors_.reserve(raw.size());
  for (RawTensor& t : raw) f->tensors_.push_back(std::move(t.info));
  return f;
}

GgufFile::~GgufFile() { detail::unmap_file({data_, size_}); }

void GgufFile::read_into(const TensorInfo& info, std::span<float> out) const {
  dequantize(info.dtype, data_ + info.offset, out);
}

std::span<const std::byte> GgufFile::stored_bytes(const TensorInfo& info) const {
  return {data_ + info.offset, static_cast<std::size_t>(info.nbytes)};
}

}  // namespace actorlm::model
