#include "model/format/open.hpp"

#include "model/format/gguf_file.hpp"
#include "model/format/safetensors_file.hpp"

#include <filesystem>

namespace actorlm::model {

std::unique_ptr<TensorSource> open_tensor_source(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw ModelFileError(path + ": no such file or directory");
  if (fs::is_directory(st)) return SafetensorsModel::open(path);
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".gguf") return GgufFile::open(path);
  if (ext == ".safetensors") return SafetensorsFile::open(path);
  throw ModelFileError(path + ": unknown kind of model file (expected a .gguf or .safetensors "
                              "file, or a model folder with config.json)");
}

}  // namespace actorlm::model
