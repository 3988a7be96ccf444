#include "actors/shard/checkpoint.hpp"

#include "actors/serving/text_codec.hpp"
#include "model/format/gguf_file.hpp"
#include "model/tokenizer/chat_template.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace actorlm::shard {

namespace fs = std::filesystem;

namespace {

constexpr const char* default_model_file = "SmolLM2-135M-Instruct.Q4_1.gguf";

fs::path executable_dir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path{} : p.parent_path();
}

model::Vocabulary load_vocabulary(const model::TensorSource& source, const std::string& model_path) {
  if (auto* g = dynamic_cast<const model::GgufFile*>(&source)) return model::vocabulary_from_gguf(*g);
  const auto json = fs::path(model_path) / "tokenizer.json";
  if (!fs::exists(json))
    throw std::runtime_error(model_path + ": no tokenizer.json next to the safetensors checkpoint");
  return model::vocabulary_from_tokenizer_json(json.string());
}

}  // namespace

std::string resolve_model_path(const config::Config& cfg) {
  if (!cfg.model.path.empty()) return cfg.model.path;
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("ACTORLM_MODELS_DIR")) dirs.emplace_back(env);
  if (auto exe = executable_dir(); !exe.empty()) dirs.push_back(exe / ".." / ".." / "models");
  dirs.emplace_back("models");
  std::string looked;
  for (const auto& d : dirs) {
    const fs::path p = d / default_model_file;
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
    looked += "\n  " + p.string();
  }
  throw std::runtime_error(std::string("model.path is not set and the default model ") +
                           default_model_file + " was not found; looked in:" + looked +
                           "\nFetch it with tools/models/fetch_default_model.sh (or run tools/setup.sh), "
                           "or set model.path");
}

std::string parallelism_text(const config::Config& cfg) {
  const auto& e = cfg.engine;
  if (e.pipeline_parallel_degree == 1) return fmt::format("tensor parallel {}", e.tensor_parallel_degree);
  return fmt::format("a layer split over {} stages", e.pipeline_parallel_degree) +
         (e.tensor_parallel_degree > 1 ? fmt::format(" of tensor parallel {}", e.tensor_parallel_degree) : "");
}

std::string model_identity(const std::string& path) {
  std::error_code ec;
  std::uintmax_t bytes = 0;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec)) bytes += e.file_size(ec);
  } else {
    bytes = fs::file_size(path, ec);
  }
  return fs::path(path).filename().string() + " (" + std::to_string(bytes) + " bytes)";
}

void set_text_side(serving::Backend& b, const model::TensorSource& source, const std::string& model_path,
                   const model::Architecture& arch) {
  model::Vocabulary vocab = load_vocabulary(source, model_path);
  const auto format = model::select_chat_format(vocab.chat_template, model::to_string(arch.family));
  const std::string system = model::default_system_message(vocab.chat_template);
  auto tokenizer = std::make_shared<const model::Tokenizer>(std::move(vocab));
  // A model may pad its embeddings past the tokenizer (harmless: those ids have no text), but
  // a tokenizer larger than the model would feed it ids it has no embedding for.
  if (tokenizer->size() > std::size_t{arch.vocab})
    throw std::invalid_argument(model_path + ": the tokenizer has " + std::to_string(tokenizer->size()) +
                                " tokens but the model's vocabulary only " + std::to_string(arch.vocab));

  const auto& v = tokenizer->vocabulary();
  if (v.eos >= 0) b.stop_tokens.push_back(v.eos);
  for (std::size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& t = v.tokens[id];
    if (tokenizer->is_special(static_cast<model::Token>(id)) &&
        (t == "<|im_end|>" || t == "<|eot_id|>" || t == "<|endoftext|>" || t == "<|end_of_text|>") &&
        std::find(b.stop_tokens.begin(), b.stop_tokens.end(), id) == b.stop_tokens.end())
      b.stop_tokens.push_back(static_cast<model::Token>(id));
  }
  b.codec = serving::make_tokenizer_codec(std::move(tokenizer), format, system);
}

}  // namespace actorlm::shard
