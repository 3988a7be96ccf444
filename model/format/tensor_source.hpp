#pragma once
// A read-only view of a model checkpoint's tensors, whatever the file format (GGUF, safetensors).
// Readers bounds-check everything they read from a file; any problem is a ModelFileError whose
// message starts with the file's path and names what is wrong.

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::model {

enum class DType : std::uint8_t { f32, f16, bf16, q8_0, q4_0, q4_1 };

std::string_view dtype_name(DType t);

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;  // row-major, outermost first: a linear layer's weight is
                                    // [out_features, in_features] (GGUF's ne[] reversed)
  std::uint64_t offset = 0;         // of the data, from the start of the file
  std::uint64_t nbytes = 0;
  std::int64_t numel() const;
};

class ModelFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const std::string& path() const = 0;
  virtual const std::vector<TensorInfo>& tensors() const = 0;
  // nullptr when absent.
  const TensorInfo* find(std::string_view name) const;
  // The tensor named `name`, dequantized to float, row-major; a ModelFileError when it is
  // missing or its shape differs from `expected_shape` (when that is not empty).
  std::vector<float> read_f32(std::string_view name,
                              std::span<const std::int64_t> expected_shape = {}) const;
  // The tensor's bytes as stored (dequantize.hpp's block layouts, little-endian), checked like
  // read_f32; valid while this source lives.
  struct Stored {
    const TensorInfo* info = nullptr;
    std::span<const std::byte> bytes;
  };
  Stored read_stored(std::string_view name, std::span<const std::int64_t> expected_shape = {}) const;

 protected:
  // Dequantizes `info`'s bytes into `out` (out.size() == info.numel()).
  virtual void read_into(const TensorInfo& info, std::span<float> out) const = 0;
  // `info`'s bytes in the file (info.nbytes of them; the reader checked they lie in the file).
  virtual std::span<const std::byte> stored_bytes(const TensorInfo& info) const = 0;

 private:
  const TensorInfo& checked(std::string_view name, std::span<const std::int64_t> expected_shape) const;
};

}  // namespace actorlm::model
