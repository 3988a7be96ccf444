#pragma once
// Vocabulary shared by the block manager, its actor, the scheduler and the shards.
// Plain C++: no CAF include (the protocol header adds inspect() for the network).

#include <cstdint>

namespace actorlm::kv {

using BlockId = std::uint32_t;  // index into the device pool or the host pool
using SeqId = std::uint64_t;    // chosen by the scheduler; unique while the sequence lives
using TokenId = std::int32_t;

// Device -> device copy for copy-on-write: the shard copies every layer's K and V of block
// `src` into block `dst` before the step's attention runs.
struct BlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

// Swap traffic: device -> host (swap out: src is a device block, dst a host block) or
// host -> device (swap in: src a host block, dst a device block).
struct BlockMove {
  BlockId src = 0;
  BlockId dst = 0;
  friend bool operator==(const BlockMove&, const BlockMove&) = default;
};

// paged: blocks are allocated as tokens arrive (PagedAttention).
// reserved: a sequence's whole maximum length is allocated at admission, as pre-paged
// systems (FasterTransformer, Orca) do; kept so both can be compared on the same run.
enum class AllocationMode : std::uint8_t { paged, reserved };

struct BlockManagerOptions {
  std::uint32_t num_device_blocks = 0;
  std::uint32_t num_host_blocks = 0;  // swap space; 0 disables swapping
  std::uint32_t block_size = 16;      // tokens per block, a power of two
  double watermark = 0.01;            // share of device blocks admission keeps free
  bool prefix_caching = true;         // ignored (off) in reserved mode
  AllocationMode mode = AllocationMode::paged;
};

struct KvStats {
  std::uint32_t block_size = 0;
  std::uint32_t device_total = 0;
  std::uint32_t device_free = 0;    // ref count 0, no cached content
  std::uint32_t device_used = 0;    // held by at least one sequence
  std::uint32_t device_cached = 0;  // ref count 0 but holding a reusable prefix block (LRU)
  std::uint32_t host_total = 0;
  std::uint32_t host_used = 0;
  std::uint32_t num_sequences = 0;
  std::uint64_t slots_allocated = 0;  // device_used * block_size
  std::uint64_t slots_filled = 0;     // slots of used device blocks that hold a token
  std::uint64_t prefix_queried_tokens = 0;  // prompt tokens looked up in the prefix cache
  std::uint64_t prefix_hit_tokens = 0;      // of which served from cached blocks
  std::uint64_t evictions = 0;              // cached blocks reused for new content

  // KV slot utilization: slots holding real tokens / slots allocated (1 when nothing is).
  double utilization() const {
    return slots_allocated == 0 ? 1.0 : double(slots_filled) / double(slots_allocated);
  }
  friend bool operator==(const KvStats&, const KvStats&) = default;
};

}  // namespace actorlm::kv
