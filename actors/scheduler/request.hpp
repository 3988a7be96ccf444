#pragma once
// What the scheduler is given (RequestSpec) and what it reports (events and records).
// Plain C++; times are nanoseconds on the actor clock.

#include "actors/kv/kv_types.hpp"
#include "actors/shard/shard_messages.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace actorlm::scheduler {

using kv::SeqId;
using kv::TokenId;
using shard::RequestId;
using Time = std::int64_t;  // ns

struct RequestSpec {
  RequestId id = 0;                    // unique among live requests
  std::vector<TokenId> prompt;         // non-empty
  std::uint32_t max_tokens = 16;       // new tokens per sample, >= 1
  std::uint32_t n = 1;                 // parallel samples sharing the prompt's KV blocks
  std::int32_t priority = 0;           // lower runs first
  // A sample ends (FinishReason::stop) on any of stop_token_ids, or on eos_token_id unless
  // ignore_eos, but only once it has more than min_tokens tokens (vLLM's min_tokens: "the
  // minimum number of tokens to generate before EOS or stop_token_ids can be generated").
  // submit() adds these ids to sampling.min_tokens_stop_ids, so that the shards mask them until
  // then (the mask may already hold more: ids that no longer stop but are masked, as vLLM masks
  // the EOS under ignore_eos).
  std::vector<TokenId> stop_token_ids;
  TokenId eos_token_id = -1;           // < 0: none
  bool ignore_eos = false;
  std::uint32_t min_tokens = 0;        // <= max_tokens
  shard::SamplingParams sampling;
};

enum class SubmitStatus : std::uint8_t {
  accepted,
  queue_full,  // the waiting queue holds max_queue_len requests (HTTP: 429)
  too_long,    // prompt + max_tokens can never fit (model length, KV cache, token budget)
  invalid,     // empty prompt, zero max_tokens or n, duplicate id, a token id outside the
               // vocabulary, sampling parameters out of range
  unavailable, // the engine lost a shard or its block manager and serves nothing more (HTTP: 503)
};

// error: the step that was to produce the sample's next token failed (a shard's error reply,
// the step deadline), or the engine lost a component; SinkBatch::error says which.
enum class FinishReason : std::uint8_t { length, stop, abort, error };

struct TokenEvent {
  RequestId request = 0;
  std::uint32_t sample = 0;
  TokenId token = 0;
  float logprob = 0;
  std::uint32_t cached_prompt_tokens = 0;  // the request's RequestRecord::cached_tokens
  std::vector<shard::TopLogprob> top;
  // On the request's first token only, when its sampling asks (prompt_logprobs >= 0): the prompt's
  // tokens 1..len-1, each given those before it, in order.
  std::vector<shard::PromptLogprob> prompt_logprobs;
};

struct FinishEvent {
  RequestId request = 0;
  std::uint32_t sample = 0;
  FinishReason reason = FinishReason::length;
};

// What one executed step produced, in order: tokens, then the samples that finished.
struct StepEvents {
  std::vector<TokenEvent> tokens;
  std::vector<FinishEvent> finished;
};

// Records (RequestRecord, StepRecord) wait until someone takes them: the metrics pump, the
// simulator's driver. A daemon that nobody scrapes keeps at most max_kept_records of each kind;
// when full, the oldest records_dropped_when_full go at once, so dropping stays O(1) per record.
inline constexpr std::size_t max_kept_records = 65536;
inline constexpr std::size_t records_dropped_when_full = 32768;

// Timestamps of a finished request, for metrics and the simulator's reports.
struct RequestRecord {
  RequestId id = 0;
  std::uint32_t prompt_tokens = 0;
  std::uint32_t cached_tokens = 0;  // of the prompt, served from the prefix cache when it was
                                    // first admitted (vLLM's num_cached_tokens; a readmission
                                    // after a preemption does not change it)
  std::uint32_t n = 1;
  Time arrival = 0;
  Time first_scheduled = -1;
  Time first_token = -1;
  Time finished = -1;
  std::vector<Time> token_times;  // every token of sample 0 (SchedulerOptions::record_token_times)
  std::vector<std::uint32_t> output_tokens;        // per sample
  std::vector<FinishReason> reasons;               // per sample
  std::uint32_t preemptions = 0;
};

// One iteration, as planned and executed.
struct StepRecord {
  std::uint64_t id = 0;
  Time start = 0;
  Time end = 0;
  std::uint32_t batch_size = 0;       // sequences with work (padding included)
  std::uint32_t prefill_tokens = 0;
  std::uint32_t decode_tokens = 0;
  std::uint32_t kv_used_blocks = 0;   // after the reservation
  std::uint32_t kv_total_blocks = 0;
  std::uint32_t preemptions = 0;      // groups preempted while planning this step
  std::int64_t shard_ns = 0;          // the execution as rank 0 reported it (measured: cpu, cuda;
                                      // modelled: sim); end - start - shard_ns: the engine's own time
  std::int64_t shard_host_ns = 0;     // of shard_ns, rank 0's host work (StepResult::host_ns): the
                                      // engine's time plus this is the step's host-side time
};

}  // namespace actorlm::scheduler
