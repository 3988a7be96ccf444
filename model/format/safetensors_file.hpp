#pragma once
// Hugging Face checkpoints: safetensors files (an 8-byte little-endian header length, a JSON
// header of {name: {dtype, shape, data_offsets}}, then the data; F32, F16 and BF16 here) and a
// model folder with config.json and either model.safetensors or model.safetensors.index.json
// naming the shard file of every tensor. Everything read is bounds-checked.

#include "model/format/tensor_source.hpp"

#include <nlohmann/json_fwd.hpp>

namespace actorlm::model {

// One .safetensors file, mapped read-only.
class SafetensorsFile final : public TensorSource {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile() override;
  const std::string& path() const override { return path_; }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }

 protected:
  void read_into(const TensorInfo& info, std::span<float> out) const override;
  std::span<const std::byte> stored_bytes(const TensorInfo& info) const override;

 private:
  friend class SafetensorsModel;  // reads its shards' tensors through read_into, stored_bytes
  SafetensorsFile() = default;
  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::vector<TensorInfo> tensors_;
};

// A HF model folder: its config.json and the tensors of all its shards.
class SafetensorsModel final : public TensorSource {
 public:
  static std::unique_ptr<SafetensorsModel> open(const std::string& folder);
  ~SafetensorsModel() override;
  const std::string& path() const override { return folder_; }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const nlohmann::json& config() const;  // config.json

 protected:
  void read_into(const TensorInfo& info, std::span<float> out) const override;
  std::span<const std::byte> stored_bytes(const TensorInfo& info) const override;

 private:
  SafetensorsModel() = default;
  const SafetensorsFile& shard_of(const TensorInfo& info) const;
  std::string folder_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<TensorInfo> tensors_;       // all shards' tensors
  std::vector<std::size_t> shard_of_;     // [tensors_.size()]
  std::unique_ptr<nlohmann::json> config_;
};

}  // namespace actorlm::model
