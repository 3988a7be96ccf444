#pragma once
// The paged KV block manager: per-sequence block tables over a device BlockPool, a host pool
// for swap, copy-on-write fork, automatic prefix caching and a "reserved" mode. Plain C++ with
// no CAF include; the block-manager actor owns one.
//
// Every operation that can fail for lack of room is a check/commit pair (can_x / x): the
// scheduler checks, preempts if needed, and commits; a commit whose check fails is a
// programming error and throws std::logic_error, as does naming an unknown sequence.
//
// Slot of the token at position p of a sequence: table[p / block_size] * block_size + p % block_size.

#include "actors/kv/block_pool.hpp"
#include "actors/kv/kv_types.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace actorlm::kv {

// Result of looking a prompt up in the prefix cache; computed once, used by check and commit.
struct PrefixMatch {
  std::vector<BlockId> blocks;        // cached blocks serving the prompt's first full blocks
  std::vector<std::uint64_t> hashes;  // chain hash of every full block looked up
  std::uint32_t num_revived = 0;      // matched blocks that are cached (ref 0), not in use
  bool looked_up = false;             // the cache was asked (the prefix-cache query counters)
  std::uint32_t cached_tokens(std::uint32_t block_size) const {
    return static_cast<std::uint32_t>(blocks.size()) * block_size;
  }
};

// Throws std::invalid_argument naming the bad field (block size not a power of two, watermark
// outside [0, 1)).
void validate(const BlockManagerOptions&);

class BlockManager {
 public:
  explicit BlockManager(const BlockManagerOptions&);

  const BlockManagerOptions& options() const { return opt_; }
  std::uint32_t block_size() const { return opt_.block_size; }
  // Blocks admission and swap-in leave free: floor(watermark * num_device_blocks).
  std::uint32_t watermark_blocks() const { return watermark_blocks_; }

  // --- admission --------------------------------------------------------------------------
  // Looks up the longest cached prefix of `prompt`. Only full blocks before the prompt's last
  // token are matched, so the last token is always computed (its logits are needed) and never
  // written into a shared block. Empty match when prefix caching is off.
  PrefixMatch match_prefix(std::span<const TokenId> prompt) const;
  // Room for the prompt (paged) or for max_total_tokens (reserved), keeping the watermark.
  bool can_allocate(std::span<const TokenId> prompt, std::uint32_t max_total_tokens,
                    const PrefixMatch&) const;
  bool can_allocate(std::span<const TokenId> prompt, std::uint32_t max_total_tokens) const;
  // Creates sequence `seq` holding `prompt`; returns how many of its tokens are already
  // computed (served by the prefix cache). max_total_tokens >= prompt size.
  std::uint32_t allocate(SeqId seq, std::span<const TokenId> prompt,
                         std::uint32_t max_total_tokens, const PrefixMatch&);
  std::uint32_t allocate(SeqId seq, std::span<const TokenId> prompt,
                         std::uint32_t max_total_tokens);

  // --- growth -----------------------------------------------------------------------------
  // Device blocks appending n tokens to `seq` takes (new blocks plus a copy-on-write copy).
  std::uint32_t blocks_to_append(SeqId seq, std::uint32_t n = 1) const;
  bool can_append(SeqId seq, std::uint32_t n = 1) const;
  // Appends slots for `tokens`. When the last block is shared it is first copied (the returned
  // copy must run before the step writes into it).
  std::optional<BlockCopy> append(SeqId seq, std::span<const TokenId> tokens);
  // The decode path in one call, as the block-manager actor uses it: check, append and
  // mark_computed(computed_tokens) together. false when there is no room or the sequence is
  // swapped out (nothing changes); otherwise `out` says the copy-on-write to perform, if any,
  // and where the block table changed: table[first_changed:] is new (first_changed = its size:
  // unchanged). Plain fields and an out-parameter, not optionals: on this per-sequence path
  // GCC 12 assembled the optionals through the stack and stalled on store forwarding.
  struct Appended {
    bool copied = false;  // a copy-on-write replaced the block being filled: `copy` runs first
    BlockCopy copy;
    std::uint32_t first_changed = 0;
  };
  bool try_append(SeqId seq, std::span<const TokenId> tokens, std::uint32_t computed_tokens,
                  Appended& out);
  // The first `num_tokens` tokens of `seq` have their KV written (or will have, by the end of
  // the step being planned: KV writes precede attention reads within a step). Their full blocks
  // become reusable through the prefix cache. Monotone; smaller values are ignored.
  void mark_computed(SeqId seq, std::uint32_t num_tokens);

  // --- fork -------------------------------------------------------------------------------
  // Child shares every block of the parent (paged); in reserved mode it gets a reservation of
  // its own and the filled blocks are copied, as pre-paged systems must.
  bool can_fork(SeqId parent) const;
  std::vector<BlockCopy> fork(SeqId parent, SeqId child);

  // --- release ----------------------------------------------------------------------------
  // Frees every block of `seq` (device or host); the last blocks are evicted first.
  void free(SeqId seq);

  // --- swap -------------------------------------------------------------------------------
  // A group (e.g. the samples of one request) moves together so shared blocks move once.
  bool can_swap_out(std::span<const SeqId> group) const;
  std::vector<BlockMove> swap_out(std::span<const SeqId> group);
  bool can_swap_in(std::span<const SeqId> group) const;
  std::vector<BlockMove> swap_in(std::span<const SeqId> group);

  // --- queries ----------------------------------------------------------------------------
  bool contains(SeqId seq) const { return seqs_.contains(seq); }
  bool is_swapped(SeqId seq) const;
  std::span<const BlockId> block_table(SeqId seq) const;
  std::uint32_t num_tokens(SeqId seq) const;
  std::span<const TokenId> tokens(SeqId seq) const;
  KvStats stats() const;
  const BlockPool& device_pool() const { return device_; }
  const BlockPool& host_pool() const { return host_; }

 private:
  struct Sequence {
    std::vector<BlockId> table;         // device blocks, or host blocks while swapped
    std::vector<TokenId> tokens;        // every token with a slot, in order
    std::vector<std::uint64_t> hashes;  // chain hashes of full blocks, computed lazily
    std::uint32_t num_computed = 0;     // tokens whose KV is written
    std::uint32_t num_registered = 0;   // leading blocks registered in the prefix cache
    bool swapped = false;
  };

  Sequence& get(SeqId seq);
  std::uint32_t blocks_to_append(const Sequence&, std::uint32_t n) const;
  const Sequence& get(SeqId seq) const;
  std::uint32_t blocks_for(std::uint32_t tokens) const {
    return (tokens + opt_.block_size - 1) >> block_shift_;
  }
  // Index in the table of the block holding position pos (block_size is a power of two:
  // a shift, not a division, on the per-token path).
  std::size_t block_of(std::size_t pos) const { return pos >> block_shift_; }
  bool caching() const { return opt_.prefix_caching && opt_.mode == AllocationMode::paged; }
  std::uint64_t block_hash(std::uint64_t parent, std::span<const TokenId> block) const;
  void register_computed_blocks(Sequence&);
  // Sets out.copied and out.copy (not first_changed).
  void append_unchecked(Sequence&, std::span<const TokenId> tokens, Appended& out);
  void mark_computed(Sequence&, std::uint32_t num_tokens);
  // Writes tokens into the slots that follow s.tokens, updating fill counts; table must cover them.
  void fill_slots(Sequence& s, std::span<const TokenId> tokens);
  std::uint32_t distinct_blocks(std::span<const SeqId> group, bool swapped) const;

  BlockManagerOptions opt_;
  std::uint32_t watermark_blocks_;
  std::uint32_t block_shift_;  // log2(block_size)
  BlockPool device_;
  BlockPool host_;
  std::unordered_map<SeqId, Sequence> seqs_;
  struct MemoEntry {
    SeqId id = 0;
    Sequence* seq = nullptr;
  };
  std::vector<MemoEntry> memo_ = std::vector<MemoEntry>(4096);  // get()'s memo; size a power of two
  std::uint64_t prefix_queried_tokens_ = 0;
  std::uint64_t prefix_hit_tokens_ = 0;
};

}  // namespace actorlm::kv
