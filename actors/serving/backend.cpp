#include "actors/serving/backend.hpp"

#include <map>
#include <mutex>
#include <stdexcept>

namespace actorlm::serving {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, BackendLoader, std::less<>> loaders;
};

// Constructed on first use: backends register from other translation units' initializers,
// whose order is unspecified.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

bool register_backend(std::string_view name, BackendLoader loader) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  if (!r.loaders.emplace(std::string(name), std::move(loader)).second)
    throw std::logic_error("backend '" + std::string(name) + "' registered twice");
  return true;
}

std::vector<std::string> registered_backends() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [name, loader] : r.loaders) out.push_back(name);
  return out;
}

RankHosting RankHosting::all(const config::Config& cfg) {
  RankHosting h;
  for (std::int64_t r = 0; r < cfg.engine.world_size(); ++r) h.ranks.push_back(static_cast<std::uint32_t>(r));
  return h;
}

Backend load_backend(const config::Config& cfg) { return load_backend(cfg, RankHosting::all(cfg)); }

Backend load_backend(const config::Config& cfg, const RankHosting& hosting) {
  const std::string_view name = config::to_string(cfg.engine.backend);
  BackendLoader loader;
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    if (auto it = r.loaders.find(name); it != r.loaders.end()) loader = it->second;
  }
  if (!loader) {
    std::string known;
    for (const auto& n : registered_backends()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("engine.backend = \"" + std::string(name) +
                                "\" is not available in this build (built with: " + known + ")");
  }
  Backend b = loader(cfg, hosting);
  if ((!b.factory && !hosting.ranks.empty()) || !b.codec)
    throw std::logic_error("backend '" + std::string(name) + "' returned no shard factory or text codec");
  return b;
}

}  // namespace actorlm::serving
