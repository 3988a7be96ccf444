#pragma once
// What the backends that run a real checkpoint (cpu, cuda) do alike: find the model file, name
// it for a cluster's fingerprint, describe the parallel layout, and give the front ends the
// checkpoint's tokenizer (text codec, chat format, stop tokens).

#include "actors/config/config.hpp"
#include "actors/serving/backend.hpp"
#include "model/arch/architecture.hpp"

#include <string>

namespace actorlm::model { class TensorSource; }

namespace actorlm::shard {

// model.path when set, else the default model (SmolLM2-135M-Instruct Q4_1) looked up in
// $ACTORLM_MODELS_DIR, <executable>/../../models and ./models. Throws std::runtime_error saying
// where it looked and how to fetch the default model.
std::string resolve_model_path(const config::Config& cfg);

// The model file's name and size: what a cluster's head and workers compare (their paths may
// differ). A safetensors folder counts the bytes of its files.
std::string model_identity(const std::string& path);

// "tensor parallel 2", "a layer split over 3 stages" or "a layer split over 2 stages of tensor
// parallel 2".
std::string parallelism_text(const config::Config& cfg);

// Sets b.codec and b.stop_tokens from the checkpoint's tokenizer (GGUF metadata, or
// tokenizer.json beside a safetensors folder), with the chat format its template (or its
// architecture) calls for. Throws std::runtime_error for a missing tokenizer and
// std::invalid_argument for a tokenizer larger than the model's vocabulary.
void set_text_side(serving::Backend& b, const model::TensorSource& source, const std::string& model_path,
                   const model::Architecture& arch);

}  // namespace actorlm::shard
