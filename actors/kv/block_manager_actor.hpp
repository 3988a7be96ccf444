#pragma once
// Spawns the block-manager actor: it owns one BlockManager and serves block_manager_actor.

#include "actors/kv/block_manager_protocol.hpp"
#include "actors/kv/kv_types.hpp"

namespace caf { class actor_system; }

namespace actorlm::kv {

// Throws std::invalid_argument for invalid options (see validate()).
block_manager_actor spawn_block_manager(caf::actor_system&, const BlockManagerOptions&);

}  // namespace actorlm::kv
