#pragma once
// Typed interface of a shard actor (one per tensor-parallel rank, any backend), and inspect()
// for its messages so they can cross the network. Include only where CAF is used.
//
// Every rank receives each Step; rank 0's StepResult carries the sampled tokens and the step's
// duration; the scheduler sends to the other ranks without awaiting them.

#include "actors/kv/block_manager_protocol.hpp"
#include "actors/shard/shard_messages.hpp"
#include "actors/shard/wire_format.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace actorlm::shard {

using shard_actor = caf::typed_actor<caf::replies_to<Step>::with<StepResult>>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, LogitBias& x) {
  return f(caf::meta::type_name("LogitBias"), x.token, x.bias);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingParams& x) {
  return f(caf::meta::type_name("SamplingParams"), x.temperature, x.top_p, x.top_k, x.min_p,
           x.seed, x.logprobs, x.top_logprobs, x.presence_penalty, x.frequency_penalty,
           x.repetition_penalty, x.logit_bias, x.min_tokens, x.min_tokens_stop_ids);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, NewSeq& x) {
  return f(caf::meta::type_name("NewSeq"), x.seq, x.request, x.sample, x.prompt_len, x.tokens,
           x.sampling);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SeqWork& x) {
  return f(caf::meta::type_name("SeqWork"), x.seq, x.appended, x.begin, x.end, x.table_first,
           x.table_blocks, x.num_samples, x.padding);
}
// Step and StepResult cross the network as one flat byte sequence each (wire_format.hpp): CAF
// copies it in one piece instead of walking every field of every sequence through its
// serializer. The bytes travel as WireBytes, whose loading checks the length before it
// allocates: CAF's own path for a std::vector<char> resizes to whatever length a message claims.
struct WireBytes {
  std::vector<char> bytes;
};

constexpr std::size_t max_wire_bytes = std::size_t{1} << 28;  // 256 MiB: far above any step

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WireBytes& x) {
  if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    std::size_t n = 0;
    if (auto err = f.begin_sequence(n)) return err;
    std::size_t limit = max_wire_bytes;
    if (auto* b = dynamic_cast<caf::binary_deserializer*>(&f)) limit = std::min(limit, b->remaining());
    if (n > limit) return caf::make_error(caf::sec::invalid_argument, "shard message: a length past its bytes");
    x.bytes.resize(n);
    if (n > 0)
      if (auto err = f.apply_raw(n, x.bytes.data())) return err;
    return f.end_sequence();
  } else {
    return f(x.bytes);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Step& x) {
  WireBytes wire;
  if constexpr (Inspector::reads_state) encode_step(x, wire.bytes);
  return f(caf::meta::type_name("Step"), wire, caf::meta::load_callback([&]() -> caf::error {
             if (decode_step(wire.bytes, x)) return caf::none;
             return caf::make_error(caf::sec::invalid_argument, "malformed shard Step on the wire");
           }));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TopLogprob& x) {
  return f(caf::meta::type_name("TopLogprob"), x.token, x.logprob);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SampledToken& x) {
  return f(caf::meta::type_name("SampledToken"), x.seq, x.token, x.logprob, x.top);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PromptLogprob& x) {
  return f(caf::meta::type_name("PromptLogprob"), x.seq, x.position, x.token, x.logprob, x.top, x.rank);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepResult& x) {
  WireBytes wire;
  if constexpr (Inspector::reads_state) encode_step_result(x, wire.bytes);
  return f(caf::meta::type_name("StepResult"), wire, caf::meta::load_callback([&]() -> caf::error {
             if (decode_step_result(wire.bytes, x)) return caf::none;
             return caf::make_error(caf::sec::invalid_argument, "malformed shard StepResult on the wire");
           }));
}

inline void add_shard_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<Step>("actorlm::shard::Step");
  cfg.add_message_type<StepResult>("actorlm::shard::StepResult");
}

}  // namespace actorlm::shard
