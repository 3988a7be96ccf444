// Admission, growth, prefix caching and queries. Fork, free and swap: block_manager_swap.cpp.
#include "actors/kv/block_manager.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

namespace actorlm::kv {

namespace {
// Parent "hash" of a sequence's first block: any fixed value; this one is the golden ratio.
constexpr std::uint64_t root_hash = 0x9E3779B97F4A7C15ull;

std::uint32_t watermark_for(const BlockManagerOptions& o) {
  validate(o);
  return static_cast<std::uint32_t>(std::floor(o.watermark * o.num_device_blocks));
}
}  // namespace

void validate(const BlockManagerOptions& o) {
  if (o.block_size == 0 || (o.block_size & (o.block_size - 1)) != 0)
    throw std::invalid_argument("block manager: block_size must be a power of two, got " +
                                std::to_string(o.block_size));
  if (!(o.watermark >= 0.0 && o.watermark < 1.0))
    throw std::invalid_argument("block manager: watermark must be in [0, 1), got " +
                                std::to_string(o.watermark));
}

BlockManager::BlockManager(const BlockManagerOptions& o)
    : opt_(o),
      watermark_blocks_(watermark_for(o)),
      block_shift_(static_cast<std::uint32_t>(std::countr_zero(o.block_size))),
      device_(o.num_device_blocks, o.block_size),
      host_(o.num_host_blocks, o.block_size) {}

BlockManager::Sequence& BlockManager::get(SeqId seq) {
  // A direct-mapped memo in front of the map: the per-token path (check, append, mark for
  // every running sequence, every step) then skips the hash table. Map nodes never move, and
  // free() clears the sequence's entry, so a memo hit is always current.
  MemoEntry& e = memo_[seq & (memo_.size() - 1)];
  if (e.seq != nullptr && e.id == seq) return *e.seq;
  auto it = seqs_.find(seq);
  if (it == seqs_.end())
    throw std::logic_error("BlockManager: unknown sequence " + std::to_string(seq));
  e = {seq, &it->second};
  return it->second;
}

const BlockManager::Sequence& BlockManager::get(SeqId seq) const {
  return const_cast<BlockManager*>(this)->get(seq);
}

std::uint64_t BlockManager::block_hash(std::uint64_t parent,
                                       std::span<const TokenId> block) const {
  return XXH3_64bits_withSeed(block.data(), block.size_bytes(), parent);
}

PrefixMatch BlockManager::match_prefix(std::span<const TokenId> prompt) const {
  PrefixMatch m;
  if (!caching() || prompt.empty()) return m;
  m.looked_up = true;
  const std::uint32_t bs = opt_.block_size;
  const std::size_t max_blocks = (prompt.size() - 1) / bs;
  m.blocks.reserve(max_blocks);
  m.hashes.reserve(max_blocks);
  std::uint64_t parent = root_hash;
  for (std::size_t i = 0; i < max_blocks; ++i) {
    auto block = prompt.subspan(i * bs, bs);
    std::uint64_t h = block_hash(parent, block);
    m.hashes.push_back(h);
    auto hit = device_.lookup(h, parent, block);
    if (!hit) break;
    m.blocks.push_back(*hit);
    if (device_.ref_count(*hit) == 0) ++m.num_revived;
    parent = h;
  }
  return m;
}

bool BlockManager::can_allocate(std::span<const TokenId> prompt, std::uint32_t max_total_tokens,
                                const PrefixMatch& m) const {
  const std::uint32_t len = static_cast<std::uint32_t>(prompt.size());
  const std::uint32_t want = opt_.mode == AllocationMode::reserved
                                 ? blocks_for(std::max(len, max_total_tokens))
                                 : blocks_for(len);
  const std::uint64_t need = std::uint64_t(want - m.blocks.size()) + watermark_blocks_;
  return need <= device_.num_available() - m.num_revived;
}

bool BlockManager::can_allocate(std::span<const TokenId> prompt,
                                std::uint32_t max_total_tokens) const {
  return can_allocate(prompt, max_total_tokens, match_prefix(prompt));
}

std::uint32_t BlockManager::allocate(SeqId seq, std::span<const TokenId> prompt,
                                     std::uint32_t max_total_tokens) {
  return allocate(seq, prompt, max_total_tokens, match_prefix(prompt));
}

std::uint32_t BlockManager::allocate(SeqId seq, std::span<const TokenId> prompt,
                                     std::uint32_t max_total_tokens, const PrefixMatch& m) {
  if (prompt.empty()) throw std::invalid_argument("BlockManager::allocate: empty prompt");
  if (seqs_.contains(seq))
    throw std::logic_error("BlockManager::allocate: sequence " + std::to_string(seq) +
                           " already exists");
  // A match taken before other operations may name blocks since evicted and reused.
  for (std::size_t i = 0; i < m.blocks.size(); ++i)
    if (!device_.is_registered_as(m.blocks[i], m.hashes[i]))
      throw std::logic_error("BlockManager::allocate: stale prefix match (match again)");
  if (!can_allocate(prompt, max_total_tokens, m))
    throw std::logic_error("BlockManager::allocate: no room (call can_allocate first)");
  Sequence& s = seqs_[seq];
  const std::uint32_t cached = m.cached_tokens(opt_.block_size);
  // Retain the matched blocks before allocating: allocation may evict cached blocks.
  s.table.reserve(blocks_for(std::max<std::uint32_t>(prompt.size(), max_total_tokens)));
  for (BlockId b : m.blocks) {
    device_.retain(b);
    s.table.push_back(b);
  }
  const std::uint32_t want = opt_.mode == AllocationMode::reserved
                                 ? blocks_for(std::max<std::uint32_t>(prompt.size(), max_total_tokens))
                                 : blocks_for(static_cast<std::uint32_t>(prompt.size()));
  while (s.table.size() < want) s.table.push_back(device_.allocate());
  s.tokens.reserve(std::max<std::size_t>(prompt.size(), max_total_tokens));
  s.tokens.assign(prompt.begin(), prompt.begin() + cached);
  fill_slots(s, prompt.subspan(cached));
  s.hashes = m.hashes;
  s.num_computed = cached;
  s.num_registered = static_cast<std::uint32_t>(m.blocks.size());
  prefix_queried_tokens_ += m.looked_up ? prompt.size() : 0;
  prefix_hit_tokens_ += cached;
  return cached;
}

void BlockManager::fill_slots(Sequence& s, std::span<const TokenId> tokens) {
  const std::uint32_t bs = opt_.block_size;
  std::size_t pos = s.tokens.size();
  if (tokens.size() == 1) {  // the decode step: one slot, no range machinery
    device_.set_filled(s.table[block_of(pos)], static_cast<std::uint32_t>((pos & (bs - 1)) + 1));
    s.tokens.push_back(tokens[0]);
    return;
  }
  const std::size_t end = pos + tokens.size();
  while (pos < end) {
    const std::size_t idx = block_of(pos);
    const std::size_t block_end = std::min(end, (idx + 1) * bs);
    device_.set_filled(s.table[idx], static_cast<std::uint32_t>(block_end - idx * bs));
    pos = block_end;
  }
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
}

std::uint32_t BlockManager::blocks_to_append(const Sequence& s, std::uint32_t n) const {
  if (s.swapped) throw std::logic_error("BlockManager: sequence is swapped out");
  const std::uint32_t len = static_cast<std::uint32_t>(s.tokens.size());
  const std::size_t idx = block_of(len);
  const bool cow = n > 0 && idx < s.table.size() && device_.ref_count(s.table[idx]) > 1;
  const std::uint32_t want = blocks_for(len + n);
  const std::uint32_t have = static_cast<std::uint32_t>(s.table.size());
  return (want > have ? want - have : 0) + (cow ? 1 : 0);
}

std::uint32_t BlockManager::blocks_to_append(SeqId seq, std::uint32_t n) const {
  return blocks_to_append(get(seq), n);
}

bool BlockManager::can_append(SeqId seq, std::uint32_t n) const {
  return blocks_to_append(get(seq), n) <= device_.num_available();
}

std::optional<BlockCopy> BlockManager::append(SeqId seq, std::span<const TokenId> tokens) {
  Sequence& s = get(seq);
  if (blocks_to_append(s, static_cast<std::uint32_t>(tokens.size())) > device_.num_available())
    throw std::logic_error("BlockManager::append: no room (call can_append first)");
  Appended out;
  append_unchecked(s, tokens, out);
  if (!out.copied) return std::nullopt;
  return out.copy;
}

bool BlockManager::try_append(SeqId seq, std::span<const TokenId> tokens, std::uint32_t computed_tokens,
                              Appended& out) {
  Sequence& s = get(seq);
  if (s.swapped ||
      blocks_to_append(s, static_cast<std::uint32_t>(tokens.size())) > device_.num_available())
    return false;
  out.first_changed = static_cast<std::uint32_t>(s.table.size());
  append_unchecked(s, tokens, out);
  // A copy-on-write replaced the block being filled: the table changed from there.
  if (out.copied) out.first_changed = static_cast<std::uint32_t>(block_of(s.tokens.size() - tokens.size()));
  mark_computed(s, computed_tokens);
  return true;
}

void BlockManager::append_unchecked(Sequence& s, std::span<const TokenId> tokens, Appended& out) {
  const auto n = static_cast<std::uint32_t>(tokens.size());
  const std::size_t len = s.tokens.size();
  const std::size_t idx = block_of(len);
  out.copied = false;
  if (n > 0 && idx < s.table.size() && device_.ref_count(s.table[idx]) > 1) {
    const BlockId old = s.table[idx];
    const BlockId fresh = device_.allocate();
    device_.set_filled(fresh, device_.filled(old));
    device_.release(old);
    s.table[idx] = fresh;
    out.copied = true;
    out.copy.src = old;
    out.copy.dst = fresh;
  }
  const std::uint32_t want = blocks_for(static_cast<std::uint32_t>(len) + n);
  while (s.table.size() < want) s.table.push_back(device_.allocate());
  fill_slots(s, tokens);
}

void BlockManager::mark_computed(SeqId seq, std::uint32_t num_tokens) {
  Sequence& s = get(seq);
  if (s.swapped) throw std::logic_error("BlockManager::mark_computed: sequence is swapped out");
  mark_computed(s, num_tokens);
}

void BlockManager::mark_computed(Sequence& s, std::uint32_t num_tokens) {
  num_tokens = std::min<std::uint32_t>(num_tokens, static_cast<std::uint32_t>(s.tokens.size()));
  if (num_tokens <= s.num_computed) return;
  s.num_computed = num_tokens;
  if (caching()) register_computed_blocks(s);
}

void BlockManager::register_computed_blocks(Sequence& s) {
  const std::uint32_t bs = opt_.block_size;
  const std::uint32_t full = static_cast<std::uint32_t>(block_of(s.num_computed));
  std::span<const TokenId> toks(s.tokens);
  for (std::uint32_t i = s.num_registered; i < full; ++i) {
    const std::uint64_t parent = i == 0 ? root_hash : s.hashes[i - 1];
    auto block = toks.subspan(std::size_t(i) * bs, bs);
    if (s.hashes.size() <= i) s.hashes.push_back(block_hash(parent, block));
    device_.register_block(s.table[i], s.hashes[i], parent, block);
  }
  s.num_registered = std::max(s.num_registered, full);
}

bool BlockManager::is_swapped(SeqId seq) const { return get(seq).swapped; }

std::span<const BlockId> BlockManager::block_table(SeqId seq) const { return get(seq).table; }

std::uint32_t BlockManager::num_tokens(SeqId seq) const {
  return static_cast<std::uint32_t>(get(seq).tokens.size());
}

std::span<const TokenId> BlockManager::tokens(SeqId seq) const { return get(seq).tokens; }

KvStats BlockManager::stats() const {
  KvStats st;
  st.block_size = opt_.block_size;
  st.device_total = device_.num_blocks();
  st.device_free = device_.num_free();
  st.device_cached = device_.num_cached();
  st.device_used = device_.num_used();
  st.host_total = host_.num_blocks();
  st.host_used = host_.num_used();
  st.num_sequences = static_cast<std::uint32_t>(seqs_.size());
  st.slots_allocated = std::uint64_t(st.device_used) * opt_.block_size;
  st.slots_filled = device_.filled_slots_in_use();
  st.prefix_queried_tokens = prefix_queried_tokens_;
  st.prefix_hit_tokens = prefix_hit_tokens_;
  st.evictions = device_.evictions();
  return st;
}

}  // namespace actorlm::kv
