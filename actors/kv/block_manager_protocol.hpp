#pragma once
// Typed interface of the block-manager actor, and inspect() for its messages so they can
// cross the network (multi-node runs). Include only where CAF is used.

#include "actors/kv/block_manager_messages.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <vector>

namespace actorlm::kv {

using kv_free_atom = caf::atom_constant<caf::atom("kv_free")>;
using kv_abort_atom = caf::atom_constant<caf::atom("kv_abort")>;
using kv_stats_atom = caf::atom_constant<caf::atom("kv_stats")>;
using kv_fork_atom = caf::atom_constant<caf::atom("kv_fork")>;
using kv_reset_atom = caf::atom_constant<caf::atom("kv_reset")>;

// reserve: one per scheduler iteration (see block_manager_messages.hpp).
// fork:    parent, child outside a step (e.g. n > 1 right after prefill); the reply carries the
//          child's table and any copies, or the child in no_room.
// free:    sequences that finished; error if one is unknown. Replies the stats after.
// abort:   cancelled sequences in any state; unknown ones are ignored. Replies those freed.
// stats:   counters and occupancy.
// reset:   forgets every sequence and the prefix cache (the shards that held the blocks' contents
//          were replaced); replies the stats after: every block free.
using block_manager_actor = caf::typed_actor<
    caf::replies_to<ReserveRequest>::with<ReserveReply>,
    caf::replies_to<kv_fork_atom, SeqId, SeqId>::with<ReserveReply>,
    caf::replies_to<kv_free_atom, std::vector<SeqId>>::with<KvStats>,
    caf::replies_to<kv_abort_atom, std::vector<SeqId>>::with<std::vector<SeqId>>,
    caf::replies_to<kv_stats_atom>::with<KvStats>,
    caf::replies_to<kv_reset_atom>::with<KvStats>>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BlockCopy& x) {
  return f(caf::meta::type_name("BlockCopy"), x.src, x.dst);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BlockMove& x) {
  return f(caf::meta::type_name("BlockMove"), x.src, x.dst);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, KvStats& x) {
  return f(caf::meta::type_name("KvStats"), x.block_size, x.device_total, x.device_free,
           x.device_used, x.device_cached, x.host_total, x.host_used, x.num_sequences,
           x.slots_allocated, x.slots_filled, x.prefix_queried_tokens, x.prefix_hit_tokens,
           x.evictions);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SeqGrowth& x) {
  return f(caf::meta::type_name("SeqGrowth"), x.seq, x.admit, x.first_token, x.num_tokens,
           x.max_total_tokens, x.computed_tokens, x.match_prefix);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ForkOp& x) {
  return f(caf::meta::type_name("ForkOp"), x.parent, x.child);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ReserveRequest& x) {
  return f(caf::meta::type_name("ReserveRequest"), x.free, x.swap_out, x.swap_in, x.forks,
           x.grow, x.tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TableDelta& x) {
  return f(caf::meta::type_name("TableDelta"), x.seq, x.first, x.blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Admitted& x) {
  return f(caf::meta::type_name("Admitted"), x.seq, x.cached_tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ReserveReply& x) {
  return f(caf::meta::type_name("ReserveReply"), x.tables, x.admitted, x.copies, x.swap_out,
           x.swap_in, x.no_room, x.stats);
}

// Registers the message types for the network; call on every node's actor_system_config.
inline void add_block_manager_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<KvStats>("actorlm::kv::KvStats");
  cfg.add_message_type<ReserveRequest>("actorlm::kv::ReserveRequest");
  cfg.add_message_type<ReserveReply>("actorlm::kv::ReserveReply");
  cfg.add_message_type<std::vector<SeqId>>("std::vector<actorlm::kv::SeqId>");
}

}  // namespace actorlm::kv
