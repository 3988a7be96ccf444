#pragma once
// The Architecture of a checkpoint, from its metadata: GGUF keys (`general.architecture`,
// `<arch>.block_count`, ..., `tokenizer.ggml.{bos,eos}_token_id`) or an HF folder's config.json
// (`model_type`, `num_hidden_layers`, ...), checked against the tensors present. Llama (and
// Mistral without sliding windows) and Falcon (rotary, no biases) are read; anything else is
// refused by name.

#include "model/arch/architecture.hpp"
#include "model/format/tensor_source.hpp"

namespace actorlm::model {

// Reads from a GgufFile or SafetensorsModel (dispatching on the dynamic type). Throws
// ModelFileError naming the file and the key, or listing what model::problems() found.
Architecture read_architecture(const TensorSource& source);

// How this checkpoint stores the weights (format, rotary pairing, fused-QKV order). Throws as
// read_architecture.
WeightLayout read_weight_layout(const TensorSource& source);

}  // namespace actorlm::model
