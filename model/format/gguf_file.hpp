#pragma once
// GGUF version 3 reader over mmap (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
// metadata key/values, the tensor directory and tensor data (F32, F16, BF16, Q8_0, Q4_0, Q4_1,
// dequantized to float on read). Every count, length, offset and size is checked against the
// file; problems are ModelFileErrors naming the file and what is wrong.

#include "model/format/tensor_source.hpp"

#include <map>
#include <optional>
#include <variant>

namespace actorlm::model {

// One metadata value. Integers keep their GGUF type in `type`, stored widened.
struct GgufValue {
  enum class Type : std::uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8,
    array = 9, u64 = 10, i64 = 11, f64 = 12
  };
  Type type = Type::u32;
  std::variant<std::uint64_t, std::int64_t, double, bool, std::string, std::vector<GgufValue>> value;
};

class GgufFile final : public TensorSource {
 public:
  static std::unique_ptr<GgufFile> open(const std::string& path);
  ~GgufFile() override;

  const std::string& path() const override { return path_; }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }

  // Typed metadata access: std::nullopt when the key is absent; a ModelFileError naming the key
  // when it is present with another type (any integer type converts to int when in range).
  std::optional<std::int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;  // f32, f64 or an integer
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<std::int64_t>> get_int_array(std::string_view key) const;
  std::optional<std::vector<double>> get_float_array(std::string_view key) const;

 protected:
  void read_into(const TensorInfo& info, std::span<float> out) const override;
  std::span<const std::byte> stored_bytes(const TensorInfo& info) const override;

 private:
  GgufFile() = default;
  std::string path_;
  const std::byte* data_ = nullptr;  // the whole file, mapped read-only
  std::size_t size_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace actorlm::model
