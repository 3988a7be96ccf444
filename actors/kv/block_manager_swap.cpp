// Fork, free and swap: the operations that move or share whole block tables.
#include "actors/kv/block_manager.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace actorlm::kv {

bool BlockManager::can_fork(SeqId parent) const {
  const Sequence& p = get(parent);
  if (p.swapped) return false;
  if (opt_.mode == AllocationMode::paged) return true;
  return p.table.size() <= device_.num_available();
}

std::vector<BlockCopy> BlockManager::fork(SeqId parent, SeqId child) {
  if (seqs_.contains(child))
    throw std::logic_error("BlockManager::fork: sequence " + std::to_string(child) +
                           " already exists");
  if (!can_fork(parent)) throw std::logic_error("BlockManager::fork: no room or parent swapped");
  Sequence copy = get(parent);
  std::vector<BlockCopy> copies;
  if (opt_.mode == AllocationMode::paged) {
    for (BlockId b : copy.table) device_.retain(b);
  } else {
    // Reserved memory is private to its sequence: the child gets its own reservation.
    for (BlockId& b : copy.table) {
      const BlockId fresh = device_.allocate();
      if (device_.filled(b) > 0) {
        device_.set_filled(fresh, device_.filled(b));
        copies.push_back({b, fresh});
      }
      b = fresh;
    }
  }
  seqs_.emplace(child, std::move(copy));
  return copies;
}

void BlockManager::free(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end())
    throw std::logic_error("BlockManager::free: unknown sequence " + std::to_string(seq));
  BlockPool& pool = it->second.swapped ? host_ : device_;
  // Release the tail first: it reaches the LRU first and is evicted before the shared prefix.
  const auto& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) pool.release(*b);
  if (MemoEntry& e = memo_[seq & (memo_.size() - 1)]; e.id == seq) e.seq = nullptr;
  seqs_.erase(it);
}

std::uint32_t BlockManager::distinct_blocks(std::span<const SeqId> group, bool swapped) const {
  std::vector<SeqId> ids(group.begin(), group.end());
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end())
    throw std::logic_error("BlockManager: a swap group names a sequence twice");
  std::vector<BlockId> all;
  for (SeqId id : group) {
    const Sequence& s = get(id);
    if (s.swapped != swapped)
      throw std::logic_error("BlockManager: sequence " + std::to_string(id) +
                             (swapped ? " is not swapped out" : " is already swapped out"));
    all.insert(all.end(), s.table.begin(), s.table.end());
  }
  std::sort(all.begin(), all.end());
  return static_cast<std::uint32_t>(std::unique(all.begin(), all.end()) - all.begin());
}

bool BlockManager::can_swap_out(std::span<const SeqId> group) const {
  return distinct_blocks(group, false) <= host_.num_available();
}

bool BlockManager::can_swap_in(std::span<const SeqId> group) const {
  return std::uint64_t(distinct_blocks(group, true)) + watermark_blocks_ <=
         device_.num_available();
}

namespace {
// Moves every block of the group's tables from `from` to `to`; a block shared inside the group
// moves once. A block also held outside the group stays where it is for those holders.
std::vector<BlockMove> move_tables(std::span<std::vector<BlockId>* const> tables, BlockPool& from,
                                   BlockPool& to) {
  std::vector<BlockMove> moves;
  std::unordered_map<BlockId, BlockId> moved;
  for (std::vector<BlockId>* table : tables) {
    for (BlockId& b : *table) {
      auto [it, fresh] = moved.try_emplace(b, 0);
      if (fresh) {
        it->second = to.allocate();
        to.set_filled(it->second, from.filled(b));
        moves.push_back({b, it->second});
      } else {
        to.retain(it->second);
      }
      from.release(b);
      b = it->second;
    }
  }
  return moves;
}
}  // namespace

std::vector<BlockMove> BlockManager::swap_out(std::span<const SeqId> group) {
  if (!can_swap_out(group)) throw std::logic_error("BlockManager::swap_out: no host room");
  std::vector<std::vector<BlockId>*> tables;
  for (SeqId id : group) tables.push_back(&get(id).table);
  auto moves = move_tables(tables, device_, host_);
  for (SeqId id : group) {
    Sequence& s = get(id);
    s.swapped = true;
    s.num_registered = 0;  // registration belongs to device blocks; redone on swap-in
  }
  return moves;
}

std::vector<BlockMove> BlockManager::swap_in(std::span<const SeqId> group) {
  if (!can_swap_in(group)) throw std::logic_error("BlockManager::swap_in: no device room");
  std::vector<std::vector<BlockId>*> tables;
  for (SeqId id : group) tables.push_back(&get(id).table);
  auto moves = move_tables(tables, host_, device_);
  for (SeqId id : group) {
    Sequence& s = get(id);
    s.swapped = false;
    if (caching()) register_computed_blocks(s);
  }
  return moves;
}

}  // namespace actorlm::kv
