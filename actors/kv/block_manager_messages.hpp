#pragma once
// Messages of the block-manager actor: one reservation round trip per scheduler iteration.
// Plain structs (no CAF include) so the scheduler and the tests can build them freely;
// block_manager_protocol.hpp adds inspect() and the typed actor interface.
//
// Contract with the shards: within one step, the KV of every scheduled token is written
// before any attention reads the cache (per layer, as vLLM's reshape_and_cache), so a block
// registered for prefix caching during a reservation may serve another sequence in the same step.

#include "actors/kv/kv_types.hpp"

#include <cstdint>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace actorlm::kv {

// One sequence's growth in the step being planned. Its tokens lie in the request's one token
// buffer (ReserveRequest::tokens), so a step of decoding sequences allocates nothing per sequence.
struct SeqGrowth {
  SeqId seq = 0;
  bool admit = false;                   // true: create the sequence with its tokens as its prompt
  std::uint32_t first_token = 0;        // its tokens that get KV slots in this step:
  std::uint32_t num_tokens = 0;         // ReserveRequest::tokens[first_token, first_token + num_tokens)
  std::uint32_t max_total_tokens = 0;   // admit only: prompt + max new tokens (reserved mode)
  std::uint32_t computed_tokens = 0;    // tokens whose KV is valid once this step has run
  bool match_prefix = true;             // admit only: false computes the whole prompt even where
                                        // the prefix cache holds it (prompt log-probabilities)
};

struct ForkOp {
  SeqId parent = 0;
  SeqId child = 0;
};

// Everything the block manager must do for one step, applied in this order:
// frees (finished, aborted and recompute-preempted sequences), swap-outs, swap-ins, forks,
// growth (in the given order, i.e. scheduling priority).
// Each group / fork / growth succeeds or fails as a whole; failures are listed in no_room.
struct ReserveRequest {
  std::vector<SeqId> free;                   // unknown ids are ignored (already gone)
  std::vector<std::vector<SeqId>> swap_out;  // groups that move together
  std::vector<std::vector<SeqId>> swap_in;
  std::vector<ForkOp> forks;
  std::vector<SeqGrowth> grow;
  std::vector<TokenId> tokens;               // [sum of grow's num_tokens]: their tokens, in order

  void add_growth(SeqId seq, bool admit, std::span<const TokenId> toks, std::uint32_t max_total_tokens,
                  std::uint32_t computed_tokens, bool match_prefix = true) {
    grow.push_back({seq, admit, static_cast<std::uint32_t>(tokens.size()),
                    static_cast<std::uint32_t>(toks.size()), max_total_tokens, computed_tokens, match_prefix});
    if (toks.size() == 1)
      tokens.push_back(toks[0]);  // a decode step's one token: no range copy (a memmove call)
    else
      tokens.insert(tokens.end(), toks.begin(), toks.end());
  }
  void add_growth(SeqId seq, bool admit, std::initializer_list<TokenId> toks,
                  std::uint32_t max_total_tokens, std::uint32_t computed_tokens) {
    add_growth(seq, admit, std::span<const TokenId>(toks.begin(), toks.size()), max_total_tokens,
               computed_tokens);
  }
  // Throws std::out_of_range when the growth's range is outside `tokens` (a malformed message).
  std::span<const TokenId> tokens_of(const SeqGrowth& g) const {
    if (std::uint64_t(g.first_token) + g.num_tokens > tokens.size())
      throw std::out_of_range("ReserveRequest: growth of sequence " + std::to_string(g.seq) +
                              " names tokens outside the request's token buffer");
    return std::span<const TokenId>(tokens).subspan(g.first_token, g.num_tokens);
  }
};

// table[first:] = blocks (device block ids), replacing what was there.
struct TableDelta {
  SeqId seq = 0;
  std::uint32_t first = 0;
  std::vector<BlockId> blocks;
};

struct Admitted {
  SeqId seq = 0;
  std::uint32_t cached_tokens = 0;  // prompt tokens already computed (prefix cache)
};

struct ReserveReply {
  std::vector<TableDelta> tables;    // changed device block tables
  std::vector<Admitted> admitted;
  std::vector<BlockCopy> copies;     // copy-on-write, before the step's attention
  std::vector<BlockMove> swap_out;   // device -> host, before swap_in
  std::vector<BlockMove> swap_in;    // host -> device
  std::vector<SeqId> no_room;        // growth, fork children and swap groups not served
  KvStats stats;                     // after the reservation
};

}  // namespace actorlm::kv
