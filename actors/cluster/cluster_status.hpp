#pragma once
// What a head knows of its workers, for /metrics (no CAF).

#include <cstdint>

namespace actorlm::cluster {

struct ClusterStatus {
  std::uint32_t workers = 0;          // worker processes in [cluster] workers ("head" is none)
  std::uint32_t workers_up = 0;       // hosting this head's ranks now
  std::uint64_t worker_failures = 0;  // engine failures a lost worker caused
  std::uint64_t recoveries = 0;       // times serving resumed after one
};

}  // namespace actorlm::cluster
