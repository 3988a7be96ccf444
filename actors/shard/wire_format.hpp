#pragma once
// The shard protocol's two hot messages as flat bytes for the network: a Step goes to every
// remote rank each iteration and rank 0's StepResult comes back, so their encoding is on the
// control plane's critical path. CAF's inspect() walks every field of every SeqWork through its
// serializer's virtual calls (about 2,600 calls for a decode step of 256 sequences, on both
// ends); these functions write the same fields into one contiguous little-endian buffer, which
// CAF then copies as one byte sequence (shard_protocol.hpp's inspect() uses them). Plain C++, no
// CAF.
//
// decode_* check every count and length against the bytes there are and return false (the
// message is refused) for a buffer that is truncated, has trailing bytes, or was written by
// another format version; they never read outside the buffer.

#include "actors/shard/shard_messages.hpp"

#include <vector>

namespace actorlm::shard {

// The format's version, which a cluster's head and workers compare at connection (fingerprint).
const char* wire_format_version();

void encode_step(const Step& step, std::vector<char>& out);
bool decode_step(const std::vector<char>& in, Step& step);

void encode_step_result(const StepResult& result, std::vector<char>& out);
bool decode_step_result(const std::vector<char>& in, StepResult& result);

}  // namespace actorlm::shard
