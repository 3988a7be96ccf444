#include "actors/kv/block_manager_batch.hpp"

#include <algorithm>
#include <span>

namespace actorlm::kv {

namespace {
void full_table(const BlockManager& bm, SeqId seq, ReserveReply& r) {
  auto t = bm.block_table(seq);
  r.tables.push_back({seq, 0, {t.begin(), t.end()}});
}

void grow(BlockManager& bm, const ReserveRequest& req, const SeqGrowth& g, ReserveReply& r) {
  const auto tokens = req.tokens_of(g);
  if (g.admit) {
    const PrefixMatch m = g.match_prefix ? bm.match_prefix(tokens) : PrefixMatch{};
    if (!bm.can_allocate(tokens, g.max_total_tokens, m)) {
      r.no_room.push_back(g.seq);
      return;
    }
    r.admitted.push_back({g.seq, bm.allocate(g.seq, tokens, g.max_total_tokens, m)});
    full_table(bm, g.seq, r);
    if (g.computed_tokens > 0) bm.mark_computed(g.seq, g.computed_tokens);
    return;
  }
  // No room either when not on the device (its swap-in in this same request was refused).
  BlockManager::Appended appended;
  if (!bm.try_append(g.seq, tokens, g.computed_tokens, appended)) {
    r.no_room.push_back(g.seq);
    return;
  }
  if (appended.copied) r.copies.push_back(appended.copy);
  const auto t = bm.block_table(g.seq);
  if (appended.first_changed < t.size())
    r.tables.push_back({g.seq, appended.first_changed, {t.begin() + appended.first_changed, t.end()}});
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
  for (const auto& g : req.grow) grow(bm, req, g, r);
  r.stats = bm.stats();
  return r;
}

}  // namespace actorlm::kv
