#pragma once
// A pool of fixed-size KV blocks with reference counts and, optionally, a content-addressed
// prefix cache: a full block may be registered under a hash chained over (parent hash, its
// token ids); when its last holder releases it, it stays reusable ("cached") in LRU order until
// an allocation needs the space and evicts it. The host swap pool is the same class with the
// cache unused.
//
// Every block is in exactly one state:
//   free    ref 0, no registered content       (on the free list)
//   cached  ref 0, registered content          (on the LRU list, still findable by hash)
//   used    ref > 0                            (maybe registered)

#include "actors/kv/kv_types.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace actorlm::kv {

class BlockPool {
 public:
  BlockPool(std::uint32_t num_blocks, std::uint32_t block_size);

  std::uint32_t num_blocks() const { return static_cast<std::uint32_t>(state_.size()); }
  std::uint32_t block_size() const { return block_size_; }
  std::uint32_t num_free() const { return static_cast<std::uint32_t>(free_.size()); }
  std::uint32_t num_cached() const { return num_cached_; }
  std::uint32_t num_used() const { return num_blocks() - num_free() - num_cached(); }
  // Blocks an allocation can take: free ones, then cached ones by eviction.
  std::uint32_t num_available() const { return num_free() + num_cached(); }

  // Takes a free block (or evicts the least recently released cached one); ref becomes 1,
  // filled 0. Precondition: num_available() > 0.
  BlockId allocate();
  // One more holder. A cached block becomes used again (leaves the LRU list).
  void retain(BlockId);
  // One holder fewer. At zero the block becomes cached if registered, free otherwise.
  void release(BlockId);

  std::uint32_t ref_count(BlockId b) const { return state_[b].ref; }
  std::uint32_t filled(BlockId b) const { return state_[b].filled; }
  // Slots of block b that hold tokens; only for used blocks.
  void set_filled(BlockId b, std::uint32_t n);

  // Prefix cache. `tokens` are the block's block_size token ids, `parent` the hash of the
  // block before it in the sequence (or the root seed). A lookup matches only when the stored
  // parent hash and token ids are equal too, so a 64-bit hash collision cannot alias content.
  std::optional<BlockId> lookup(std::uint64_t hash, std::uint64_t parent,
                                std::span<const TokenId> tokens) const;
  // Registers a used, full block. Returns false (and changes nothing) when the hash already
  // names another block: that content is cached once.
  bool register_block(BlockId, std::uint64_t hash, std::uint64_t parent,
                      std::span<const TokenId> tokens);
  bool is_registered(BlockId b) const { return registered_[b] != 0; }
  bool is_registered_as(BlockId b, std::uint64_t hash) const {
    return registered_[b] != 0 && hash_[b] == hash;
  }

  std::uint64_t evictions() const { return evictions_; }
  // Sum of filled() over used blocks, kept incrementally.
  std::uint64_t filled_slots_in_use() const { return used_filled_; }

 private:
  static constexpr BlockId nil = ~BlockId{0};
  void lru_push_back(BlockId);
  void lru_unlink(BlockId);
  void unregister(BlockId);

  std::uint32_t block_size_;
  struct BlockState {
    std::uint32_t ref = 0;     // holders (sequence tables)
    std::uint32_t filled = 0;  // slots holding a token
  };
  std::vector<BlockState> state_;         // [num_blocks]; the hot per-block data, together
  std::vector<BlockId> free_;             // stack of free blocks
  // Cached-block LRU as an intrusive list: prev/next per block, oldest at head.
  std::vector<BlockId> lru_prev_, lru_next_;  // [num_blocks]
  BlockId lru_head_ = nil, lru_tail_ = nil;
  std::uint32_t num_cached_ = 0;
  // Registered content, per block.
  std::vector<std::uint8_t> registered_;       // [num_blocks]
  std::vector<std::uint64_t> hash_, parent_;   // [num_blocks]
  std::vector<TokenId> tokens_;                // [num_blocks, block_size]
  std::unordered_map<std::uint64_t, BlockId> by_hash_;
  std::uint64_t evictions_ = 0;
  std::uint64_t used_filled_ = 0;
};

}  // namespace actorlm::kv
