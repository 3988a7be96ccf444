#include "actors/kv/block_manager_actor.hpp"

#include "actors/kv/block_manager.hpp"
#include "actors/kv/block_manager_batch.hpp"

#include <caf/actor_system.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <optional>
#include <stdexcept>

namespace actorlm::kv {

namespace {

struct BlockManagerState {
  std::optional<BlockManager> bm;
  static inline const char* name = "block_manager";
};

using self_ptr = block_manager_actor::stateful_pointer<BlockManagerState>;

// A request that breaks the protocol (unknown sequence, double admit...) is the sender's bug:
// it gets an error reply and the actor keeps serving everyone else.
template <class F>
auto guarded(F&& f) -> caf::result<decltype(f())> {
  try {
    return f();
  } catch (const std::exception& e) {
    return caf::make_error(caf::sec::invalid_argument, std::string{e.what()});
  }
}

block_manager_actor::behavior_type block_manager_fn(self_ptr self, BlockManagerOptions opt) {
  self->state.bm.emplace(opt);
  return {
      [self](const ReserveRequest& req) {
        return guarded([&] { return apply_reservation(*self->state.bm, req); });
      },
      [self](kv_fork_atom, SeqId parent, SeqId child) {
        return guarded([&] {
          ReserveRequest req;
          req.forks.push_back({parent, child});
          return apply_reservation(*self->state.bm, req);
        });
      },
      [self](kv_free_atom, const std::vector<SeqId>& seqs) {
        return guarded([&] {
          for (SeqId s : seqs) self->state.bm->free(s);
          return self->state.bm->stats();
        });
      },
      [self](kv_abort_atom, const std::vector<SeqId>& seqs) {
        return guarded([&] {
          std::vector<SeqId> freed;
          for (SeqId s : seqs) {
            if (!self->state.bm->contains(s)) continue;
            self->state.bm->free(s);
            freed.push_back(s);
          }
          return freed;
        });
      },
      [self](kv_stats_atom) { return self->state.bm->stats(); },
      [self](kv_reset_atom) {
        const BlockManagerOptions opt = self->state.bm->options();
        self->state.bm.emplace(opt);
        return self->state.bm->stats();
      },
  };
}

}  // namespace

block_manager_actor spawn_block_manager(caf::actor_system& sys, const BlockManagerOptions& opt) {
  validate(opt);  // throws here, in the caller, rather than killing the new actor
  return sys.spawn(block_manager_fn, opt);
}

}  // namespace actorlm::kv
