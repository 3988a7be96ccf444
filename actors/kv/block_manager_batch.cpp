#include "actors/kv/block_manager_batch.hpp"

#include <algorithm>
#include <span>

namespace actorlm::kv {

namespace {
void full_table(const BlockManager& bm, SeqId seq, ReserveReply& r) {
  auto t = bm.block_table(seq);
  r.tables.push_back({seq, 0, {t.begin(), t.end()}});
}

void grow(BlockManager& bm, const SeqGrowth& g, ReserveReply& r) {
  if (g.admit) {
    const PrefixMatch m = bm.match_prefix(g.tokens);
    if (!bm.can_allocate(g.tokens, g.max_total_tokens, m)) {
      r.no_room.push_back(g.seq);
      return;
    }
    r.admitted.push_back({g.seq, bm.allocate(g.seq, g.tokens, g.max_total_tokens, m)});
    full_table(bm, g.seq, r);
    if (g.computed_tokens > 0) bm.mark_computed(g.seq, g.computed_tokens);
  } else {
    // Not on the device (its swap-in in this same request was refused): no room either.
    if (bm.contains(g.seq) && bm.is_swapped(g.seq)) {
      r.no_room.push_back(g.seq);
      return;
    }
    const std::size_t old_size = bm.block_table(g.seq).size();
    const auto appended = bm.try_append(g.seq, g.tokens, g.computed_tokens);
    if (!appended) {
      r.no_room.push_back(g.seq);
      return;
    }
    std::size_t first = old_size;
    if (appended->copy) {
      r.copies.push_back(*appended->copy);
      const auto t = bm.block_table(g.seq);
      first = std::find(t.begin(), t.end(), appended->copy->dst) - t.begin();
    }
    const auto t = bm.block_table(g.seq);
    if (first < t.size())
      r.tables.push_back({g.seq, static_cast<std::uint32_t>(first), {t.begin() + first, t.end()}});
  }
}
}  // namespace

ReserveReply apply_reservation(BlockManager& bm, const ReserveRequest& req) {
  ReserveReply r;
  for (SeqId s : req.free)
    if (bm.contains(s)) bm.free(s);
  for (const auto& group : req.swap_out) {
    if (!bm.can_swap_out(group)) {
      r.no_room.insert(r.no_room.end(), group.begin(), group.end());
      continue;
    }
    auto moves = bm.swap_out(group);
    r.swap_out.insert(r.swap_out.end(), moves.begin(), moves.end());
  }
  for (const auto& group : req.swap_in) {
    if (!bm.can_swap_in(group)) {
      r.no_room.insert(r.no_room.end(), group.begin(), group.end());
      continue;
    }
    auto moves = bm.swap_in(group);
    r.swap_in.insert(r.swap_in.end(), moves.begin(), moves.end());
    for (SeqId s : group) full_table(bm, s, r);
  }
  for (const auto& f : req.forks) {
    if (!bm.can_fork(f.parent)) {
      r.no_room.push_back(f.child);
      continue;
    }
    auto copies = bm.fork(f.parent, f.child);
    r.copies.insert(r.copies.end(), copies.begin(), copies.end());
    full_table(bm, f.child, r);
  }
  for (const auto& g : req.grow) grow(bm, g, r);
  r.stats = bm.stats();
  return r;
}

}  // namespace actorlm::kv
