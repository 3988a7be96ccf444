#pragma once
// The boundary between the engine and a shard backend (sim, cpu, cuda): what a backend hands
// the engine and the front ends once it is set up, and the registry that every backend adds
// itself to, by its engine.backend name, beside its own code (actors/shard/cpu/cpu_backend.cpp,
// sim/backend/sim_backend.cpp). ServedModel, the daemon and the CLI look a backend up here and
// never switch on its name; nothing here knows which backends exist.
//
// Backend libraries register through static initializers, so executables link them whole:
// link the CMake target `actorlm_backends`, never a backend library alone.

#include "actors/config/config.hpp"
#include "actors/engine/engine.hpp"
#include "kernels/rendezvous_store.hpp"
#include "model/tokenizer/tokenizer.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::serving {

class TextCodec;

// One line of a rank's memory breakdown, e.g. {"weights", 2.1e9}.
struct MemoryItem {
  std::string what;
  double bytes = 0;
};

struct Backend {
  engine::KvCapacity capacity;          // KV blocks (device, host), block size, vocabulary
  engine::ShardFactory factory;         // each rank's shard actor, once per rank
  std::shared_ptr<const TextCodec> codec;      // text <-> tokens for the front ends
  std::vector<model::Token> stop_tokens;       // end-of-turn / end-of-text tokens
  std::string description;              // one line for the start-up log
  std::vector<MemoryItem> memory;       // one rank's memory, the KV cache included
  // What a cluster's head and its workers must agree on beyond the configuration's keys, e.g.
  // the model file's name and size (paths differ between machines); empty when nothing.
  std::string identity;
  // Whether its shards compute prompt log-probabilities (SamplingParams::prompt_logprobs); the
  // front ends refuse a request for them otherwise.
  bool prompt_logprobs = true;
};

// Which ranks (engine.world_size()) this process hosts, and how they meet the ranks elsewhere. In one
// process: every rank, no store. The head of a cluster hosts none (it loads what the engine and
// the front ends need, not the weights); a worker hosts the ranks its head gives it.
struct RankHosting {
  std::vector<std::uint32_t> ranks;  // ascending, below engine.world_size(); the
                                     // backend's factory serves exactly these
  // Where the data plane's group meets (Gloo's addresses on cpu); null: every rank is here.
  std::shared_ptr<kernels::RendezvousStore> store;
  std::string data_address;          // this process's address for the data plane (with store)

  static RankHosting all(const config::Config&);
  static RankHosting none() { return {}; }
};

// Sets a backend up from the configuration for the ranks `hosting` names; throws with a
// user-facing message (model::ModelFileError, std::invalid_argument, std::runtime_error).
using BackendLoader = std::function<Backend(const config::Config&, const RankHosting& hosting)>;

// How long a rank of a backend may take to stop after a peer is lost (a worker's process died):
// the longest any of its collectives waits before it gives up (0: its ranks never wait on each
// other). A cluster's head waits that long for its own ranks before it loads their successors
// beside them.
using StopBound = std::function<std::chrono::milliseconds(const config::Config&)>;

// The longest a rank may wait for a peer that is still working on a step: the engine's step
// deadline (engine.step_timeout_s, after which the scheduler fails the step) and a 10 s margin.
// Backends build their collectives' timeouts and stop bounds on it.
std::chrono::milliseconds step_wait_bound(const config::Config&);

// Adds a backend under `name` (the engine.backend value); returns true so that a backend can
// register from a namespace-scope initializer. A second registration of a name, or one without a
// stop bound, throws.
bool register_backend(std::string_view name, BackendLoader loader, StopBound stop_bound);
// The registered names, sorted.
std::vector<std::string> registered_backends();
// Sets up the backend named by engine.backend with every rank in this process. Throws
// std::invalid_argument naming the registered ones when this build has none by that name (e.g.
// "cuda" without CUDA).
Backend load_backend(const config::Config&);
// The same for the ranks `hosting` names (a cluster's head: none; a worker: its own). Without
// ranks the factory is left empty.
Backend load_backend(const config::Config&, const RankHosting& hosting);
// The stop bound of engine.backend's ranks for this configuration. Throws std::invalid_argument
// as load_backend does for a backend this build lacks.
std::chrono::milliseconds rank_stop_bound(const config::Config&);

}  // namespace actorlm::serving
