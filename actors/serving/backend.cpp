#include "actors/serving/backend.hpp"

#include <map>
#include <mutex>
#include <stdexcept>

namespace actorlm::serving {

namespace {

struct Registry {
  std::mutex mutex;
  struct Entry {
    BackendLoader loader;
    StopBound stop_bound;
  };
  std::map<std::string, Entry, std::less<>> backends;
};

// Constructed on first use: backends register from other translation units' initializers,
// whose order is unspecified.
Registry& registry() {
  static Registry r;
  return r;
}

// The registered entry of engine.backend; throws std::invalid_argument naming the registered ones.
Registry::Entry entry_of(const config::Config& cfg) {
  const std::string_view name = config::to_string(cfg.engine.backend);
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    if (auto it = r.backends.find(name); it != r.backends.end()) return it->second;
  }
  std::string known;
  for (const auto& n : registered_backends()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("engine.backend = \"" + std::string(name) + "\" is not available in this build (built with: " +
                              known + ")");
}

}  // namespace

std::chrono::milliseconds step_wait_bound(const config::Config& cfg) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(cfg.engine.step_timeout_s * 1000)) + std::chrono::seconds(10);
}

bool register_backend(std::string_view name, BackendLoader loader, StopBound stop_bound) {
  if (!stop_bound) throw std::logic_error("backend '" + std::string(name) + "' registered without a stop bound");
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  if (!r.backends.emplace(std::string(name), Registry::Entry{std::move(loader), std::move(stop_bound)}).second)
    throw std::logic_error("backend '" + std::string(name) + "' registered twice");
  return true;
}

std::vector<std::string> registered_backends() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [name, entry] : r.backends) out.push_back(name);
  return out;
}

RankHosting RankHosting::all(const config::Config& cfg) {
  RankHosting h;
  for (std::int64_t r = 0; r < cfg.engine.world_size(); ++r) h.ranks.push_back(static_cast<std::uint32_t>(r));
  return h;
}

Backend load_backend(const config::Config& cfg) { return load_backend(cfg, RankHosting::all(cfg)); }

Backend load_backend(const config::Config& cfg, const RankHosting& hosting) {
  Backend b = entry_of(cfg).loader(cfg, hosting);
  if ((!b.factory && !hosting.ranks.empty()) || !b.codec)
    throw std::logic_error("backend '" + std::string(config::to_string(cfg.engine.backend)) +
                           "' returned no shard factory or text codec");
  return b;
}

std::chrono::milliseconds rank_stop_bound(const config::Config& cfg) { return entry_of(cfg).stop_bound(cfg); }

}  // namespace actorlm::serving
