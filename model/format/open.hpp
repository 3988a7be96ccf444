#pragma once
// Opens a checkpoint by what `path` is: a .gguf file (GgufFile), a .safetensors file
// (SafetensorsFile) or a Hugging Face model folder (SafetensorsModel). Anything else, or a
// missing path, is a ModelFileError naming the path.

#include "model/format/tensor_source.hpp"

#include <memory>
#include <string>

namespace actorlm::model {

std::unique_ptr<TensorSource> open_tensor_source(const std::string& path);

}  // namespace actorlm::model
