#pragma once
// Applies one step's ReserveRequest to a BlockManager: the block-manager actor's whole job,
// kept CAF-free so it is tested directly.

#include "actors/kv/block_manager.hpp"
#include "actors/kv/block_manager_messages.hpp"

namespace actorlm::kv {

// Growth of a sequence that is swapped out (its swap-in was refused) is "no room".
// Throws std::logic_error when the request names an unknown sequence or admits an existing one
// (a scheduler bug); items before the bad one stay applied.
ReserveReply apply_reservation(BlockManager&, const ReserveRequest&);

}  // namespace actorlm::kv
