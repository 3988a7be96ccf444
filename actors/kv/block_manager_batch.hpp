#pragma once
// Applies one step's ReserveRequest to a BlockManager: the block-manager actor's whole job,
// kept CAF-free so it is tested directly.

#include "actors/kv/block_manager.hpp"
#include "actors/kv/block_manager_messages.hpp"

namespace actorlm::kv {

// Throws std::logic_error when the request names an unknown sequence, admits an existing one
// or grows a swapped one (a scheduler bug); items before the bad one stay applied.
ReserveReply apply_reservation(BlockManager&, const ReserveRequest&);

}  // namespace actorlm::kv
