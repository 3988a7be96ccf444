#include "actors/kv/block_pool.hpp"

#include <algorithm>
#include <cassert>
#include <stdexcept>

namespace actorlm::kv {

BlockPool::BlockPool(std::uint32_t num_blocks, std::uint32_t block_size)
    : block_size_(block_size),
      state_(num_blocks),
      lru_prev_(num_blocks, nil),
      lru_next_(num_blocks, nil),
      registered_(num_blocks, 0),
      hash_(num_blocks, 0),
      parent_(num_blocks, 0) {
  if (block_size == 0) throw std::invalid_argument("BlockPool: block_size must be positive");
  // Lowest ids on top of the stack: allocation order is 0, 1, 2... (readable tests and traces).
  free_.reserve(num_blocks);
  for (std::uint32_t i = num_blocks; i-- > 0;) free_.push_back(i);
}

BlockId BlockPool::allocate() {
  BlockId b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    if (lru_head_ == nil) throw std::logic_error("BlockPool::allocate: no block available");
    b = lru_head_;
    lru_unlink(b);
    unregister(b);
    ++evictions_;
  }
  state_[b] = {1, 0};
  return b;
}

void BlockPool::retain(BlockId b) {
  if (state_[b].ref++ == 0) {
    // Only cached blocks can be revived: free ones have no content worth sharing.
    assert(registered_[b]);
    lru_unlink(b);
    used_filled_ += state_[b].filled;
  }
}

void BlockPool::release(BlockId b) {
  if (state_[b].ref == 0) throw std::logic_error("BlockPool::release: block is not in use");
  if (--state_[b].ref > 0) return;
  used_filled_ -= state_[b].filled;
  if (registered_[b]) {
    lru_push_back(b);
  } else {
    state_[b].filled = 0;
    free_.push_back(b);
  }
}

void BlockPool::set_filled(BlockId b, std::uint32_t n) {
  assert(state_[b].ref > 0 && n <= block_size_);
  used_filled_ += n;
  used_filled_ -= state_[b].filled;
  state_[b].filled = n;
}

std::optional<BlockId> BlockPool::lookup(std::uint64_t hash, std::uint64_t parent,
                                         std::span<const TokenId> tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  BlockId b = it->second;
  if (parent_[b] != parent) return std::nullopt;
  const TokenId* stored = tokens_.data() + std::size_t(b) * block_size_;
  if (!std::equal(tokens.begin(), tokens.end(), stored)) return std::nullopt;
  return b;
}

bool BlockPool::register_block(BlockId b, std::uint64_t hash, std::uint64_t parent,
                               std::span<const TokenId> tokens) {
  assert(state_[b].ref > 0 && tokens.size() == block_size_);
  if (registered_[b]) return hash_[b] == hash;
  if (tokens_.empty()) {  // first registration: size the cache once, not on the hot path
    tokens_.resize(std::size_t(state_.size()) * block_size_);
    by_hash_.reserve(state_.size());
  }
  if (!by_hash_.try_emplace(hash, b).second) return false;  // one lookup, not two
  registered_[b] = 1;
  hash_[b] = hash;
  parent_[b] = parent;
  std::copy(tokens.begin(), tokens.end(), tokens_.data() + std::size_t(b) * block_size_);
  return true;
}

void BlockPool::unregister(BlockId b) {
  by_hash_.erase(hash_[b]);
  registered_[b] = 0;
}

void BlockPool::lru_push_back(BlockId b) {
  lru_prev_[b] = lru_tail_;
  lru_next_[b] = nil;
  if (lru_tail_ != nil) lru_next_[lru_tail_] = b; else lru_head_ = b;
  lru_tail_ = b;
  ++num_cached_;
}

void BlockPool::lru_unlink(BlockId b) {
  BlockId p = lru_prev_[b], n = lru_next_[b];
  if (p != nil) lru_next_[p] = n; else lru_head_ = n;
  if (n != nil) lru_prev_[n] = p; else lru_tail_ = p;
  lru_prev_[b] = lru_next_[b] = nil;
  --num_cached_;
}

}  // namespace actorlm::kv
