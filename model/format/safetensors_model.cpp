// SafetensorsModel: a Hugging Face model folder (config.json plus one safetensors file or an
// index naming the shard of every tensor).
#include "model/format/safetensors_file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace actorlm::model {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelFileError(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    throw ModelFileError(path + ": not valid JSON: " + e.what());
  }
}

// Shards are plain file names in the folder: no separators, no "." or "..".
bool is_plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find_first_of("/\\") == std::string::npos &&
         s.find('\0') == std::string::npos;
}

}  // namespace

std::unique_ptr<SafetensorsModel> SafetensorsModel::open(const std::string& folder) {
  std::unique_ptr<SafetensorsModel> m(new SafetensorsModel());
  m->folder_ = folder;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) throw ModelFileError(folder + ": not a directory");
  const fs::path dir(folder);

  const std::string config_path = (dir / "config.json").string();
  if (!fs::exists(config_path, ec)) throw ModelFileError(folder + ": no config.json");
  m->config_ = std::make_unique<json>(read_json_file(config_path));
  if (!m->config_->is_object()) throw ModelFileError(config_path + ": not a JSON object");

  const std::string index_path = (dir / "model.safetensors.index.json").string();
  const std::string single_path = (dir / "model.safetensors").string();
  if (fs::exists(index_path, ec)) {
    const json index = read_json_file(index_path);
    const auto fail = [&](const std::string& what) {
      throw ModelFileError(index_path + ": " + what);
    };
    if (!index.is_object()) fail("not a JSON object");
    const auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object()) fail("weight_map is missing or not an object");

    std::map<std::string, std::size_t> shard_index;  // file name -> shards_ slot
    for (const auto& [name, file] : wm->items()) {
      if (!file.is_string()) fail("tensor '" + name + "': shard name is not a string");
      const auto shard = file.get<std::string>();
      if (!is_plain_file_name(shard)) {
        fail("tensor '" + name + "' maps to '" + shard +
             "', which is not a file name inside the folder");
      }
      shard_index.emplace(shard, 0);
    }
    for (auto& [shard, slot] : shard_index) {
      slot = m->shards_.size();
      m->shards_.push_back(SafetensorsFile::open((dir / shard).string()));
    }
    for (const auto& [name, file] : wm->items()) {
      const auto shard = file.get<std::string>();
      const std::size_t slot = shard_index.at(shard);
      const TensorInfo* info = m->shards_[slot]->find(name);
      if (info == nullptr) fail("tensor '" + name + "' is not in its shard '" + shard + "'");
      m->tensors_.push_back(*info);
      m->shard_of_.push_back(slot);
    }
  } else if (fs::exists(single_path, ec)) {
    m->shards_.push_back(SafetensorsFile::open(single_path));
    m->tensors_ = m->shards_[0]->tensors();
    m->shard_of_.assign(m->tensors_.size(), 0);
  } else {
    throw ModelFileError(folder + ": no model.safetensors or model.safetensors.index.json");
  }
  return m;
}

SafetensorsModel::~SafetensorsModel() = default;

const nlohmann::json& SafetensorsModel::config() const { return *config_; }

const SafetensorsFile& SafetensorsModel::shard_of(const TensorInfo& info) const {
  // `info` is one of tensors_ (read_f32 found it there); its offset is within its own shard.
  const auto it = std::find_if(tensors_.begin(), tensors_.end(),
                               [&](const TensorInfo& t) { return &t == &info; });
  if (it == tensors_.end())
    throw ModelFileError(folder_ + ": tensor '" + info.name + "' is not mine");
  return *shards_[shard_of_[static_cast<std::size_t>(it - tensors_.begin())]];
}

void SafetensorsModel::read_into(const TensorInfo& info, std::span<float> out) const {
  shard_of(info).read_into(info, out);
}

std::span<const std::byte> SafetensorsModel::stored_bytes(const TensorInfo& info) const {
  return shard_of(info).stored_bytes(info);
}

}  // namespace actorlm::model
