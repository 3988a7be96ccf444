#pragma once
// Test-only builders of GGUF and safetensors bytes, including wrong ones: every count, length,
// offset and type can be set to anything. GgufBuilder records where each header field lies so
// tests can cut or overwrite the file exactly there. Plus a temporary folder for the results.

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

namespace actorlm::model::test {

using Bytes = std::vector<std::uint8_t>;

template <class T>
void put(Bytes& b, T v) {
  const std::size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));  // the test host is little-endian, as GGUF here is
}

inline void put_string(Bytes& b, const std::string& s) {
  put<std::uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

template <class T>
Bytes le(T v) {
  Bytes b;
  put(b, v);
  return b;
}

inline Bytes str_bytes(const std::string& s) {
  Bytes b;
  put_string(b, s);
  return b;
}

inline Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// ggml type ids and GGUF value type ids, as stored.
enum GgmlType : std::uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 8, BF16 = 30 };
enum GgufType : std::uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32V = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12
};

class GgufBuilder {
 public:
  struct Field {
    std::size_t offset = 0;
    std::size_t size = 0;
  };

  GgufBuilder& magic(std::string m) { magic_ = std::move(m); return *this; }
  GgufBuilder& version(std::uint32_t v) { version_ = v; return *this; }
  // Padding used to place the data section and tensor data (the key is added separately).
  GgufBuilder& alignment(std::uint64_t a) { alignment_ = a; return *this; }
  GgufBuilder& tensor_count(std::uint64_t n) { tensor_count_ = n; return *this; }
  GgufBuilder& kv_count(std::uint64_t n) { kv_count_ = n; return *this; }

  // A metadata entry whose value (after the u32 type) is `value` as given.
  GgufBuilder& kv(const std::string& key, std::uint32_t type, Bytes value) {
    kvs_.push_back({key, type, std::move(value)});
    return *this;
  }
  GgufBuilder& kv_u32(const std::string& key, std::uint32_t v) { return kv(key, U32, le(v)); }
  GgufBuilder& kv_string(const std::string& key, const std::string& v) {
    return kv(key, STRING, str_bytes(v));
  }
  // An array of `count` elements of `elem` type, `elems` being their bytes.
  GgufBuilder& kv_array(const std::string& key, std::uint32_t elem, std::uint64_t count,
                        const Bytes& elems) {
    return kv(key, ARRAY, concat({le(elem), le(count), elems}));
  }

  // A tensor with `ne` innermost first; data placed after the previous tensor's (aligned) unless
  // `offset` says where, relative to the data section. Empty `data` writes nothing.
  GgufBuilder& tensor(const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type,
                      Bytes data, std::optional<std::uint64_t> offset = std::nullopt) {
    tensors_.push_back({name, std::move(ne), type, std::move(data), offset});
    return *this;
  }

  // The file; Fields and data_start() describe it afterwards.
  Bytes build() {
    fields_.clear();
    Bytes b;
    field(b, "magic", Bytes(magic_.begin(), magic_.end()));
    field(b, "version", le(version_));
    field(b, "tensor count", le<std::uint64_t>(tensor_count_.value_or(tensors_.size())));
    field(b, "metadata count", le<std::uint64_t>(kv_count_.value_or(kvs_.size())));
    for (const Kv& k : kvs_) {
      field(b, "key of " + k.key, str_bytes(k.key));
      field(b, "type of " + k.key, le(k.type));
      field(b, "value of " + k.key, k.value);
    }
    std::uint64_t next = 0;
    std::vector<std::uint64_t> offsets;
    for (const Tensor& t : tensors_) {
      const std::uint64_t at = t.offset.value_or(next);
      offsets.push_back(at);
      next = pad(std::max(next, at + t.data.size()));
      field(b, "name of " + t.name, str_bytes(t.name));
      field(b, "dimension count of " + t.name, le<std::uint32_t>(t.ne.size()));
      Bytes dims;
      for (const std::uint64_t d : t.ne) put(dims, d);
      field(b, "dimensions of " + t.name, dims);
      field(b, "type of " + t.name, le(t.type));
      field(b, "data offset of " + t.name, le(at));
    }
    b.resize(pad(b.size()), 0);
    data_start_ = b.size();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const Bytes& d = tensors_[i].data;
      if (d.empty()) continue;  // lets a test claim data anywhere without writing it
      const std::size_t at = data_start_ + offsets[i];
      if (b.size() < at + d.size()) b.resize(at + d.size(), 0);
      std::copy(d.begin(), d.end(), b.begin() + static_cast<std::ptrdiff_t>(at));
    }
    b.resize(pad(b.size()), 0);
    return b;
  }

  // After build(): where each field lies ("tensor count", "key of general.name", ...).
  const Field& at(const std::string& label) const { return fields_.at(label); }
  std::size_t data_start() const { return data_start_; }

 private:
  struct Kv {
    std::string key;
    std::uint32_t type;
    Bytes value;
  };
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type;
    Bytes data;
    std::optional<std::uint64_t> offset;
  };

  std::uint64_t pad(std::uint64_t n) const {
    return (n + alignment_ - 1) / alignment_ * alignment_;
  }
  void field(Bytes& b, const std::string& label, const Bytes& bytes) {
    fields_[label] = {b.size(), bytes.size()};
    b.insert(b.end(), bytes.begin(), bytes.end());
  }

  std::string magic_ = "GGUF";
  std::uint32_t version_ = 3;
  std::uint64_t alignment_ = 32;
  std::optional<std::uint64_t> tensor_count_, kv_count_;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  std::map<std::string, Field> fields_;
  std::size_t data_start_ = 0;
};

// A safetensors file: the u64 header length (the header's own unless overridden), the header
// text and the data area.
inline Bytes safetensors_bytes(const std::string& header, const Bytes& data,
                               std::optional<std::uint64_t> header_len = std::nullopt) {
  Bytes b = le<std::uint64_t>(header_len.value_or(header.size()));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// A fresh folder under the system's temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("actorlm_format_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string write(const std::string& name, const Bytes& bytes) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
  std::string write(const std::string& name, const std::string& text) const {
    return write(name, Bytes(text.begin(), text.end()));
  }

 private:
  std::filesystem::path path_;
};

}  // namespace actorlm::model::test
