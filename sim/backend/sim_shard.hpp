#pragma once
// The sim backend's shard actor: a GPU that only keeps time. Rank 0 answers each Step after
// the step's modelled duration of actor-clock time (virtual time on CAF's test coordinator,
// wall time under the normal scheduler: a fake GPU server), with one deterministic token per
// requested sample. Ranks above 0 accept every Step and do nothing: the scheduler sends each
// step to every rank but awaits only rank 0.

#include "actors/config/config.hpp"
#include "actors/shard/shard_protocol.hpp"
#include "sim/model/cost_model.hpp"

#include <cstdint>
#include <memory>
#include <unordered_map>

namespace caf { class actor_system; }

namespace actorlm::sim {

// What every rank of one engine shares (immutable).
struct SimShardModel {
  CostModel cost;
  std::uint32_t vocab_size = 0;
  std::int32_t eos_token_id = -1;  // never sampled unless a request biases it up (< 0: none)
  std::uint64_t seed = 0;          // sim.seed, mixed into every draw
  // sim.fault at step fault_step on rank fault_rank (config.hpp): "error" answers that step with
  // an error, "hang" never answers it (later steps are answered), "exit" stops the shard actor.
  // Rank 0 applies the step's sequence changes first, as a shard failing mid-step would have.
  config::SimFault fault = config::SimFault::none;
  std::uint64_t fault_step = 0;
  std::uint32_t fault_rank = 0;
};

shard::shard_actor spawn_sim_shard(caf::actor_system&, std::uint32_t rank,
                                   std::shared_ptr<const SimShardModel>);

class SimSequences;

// The step as the cost model sees it. A padding row (dynamic batching's finished member) costs
// like one decode token attending to the longest context in the step, as in a padded batch.
// With the sequences (applied for the step), a chunk that scores prompt tokens (prompt
// log-probabilities) puts every one of its rows through the LM head.
StepShape step_shape(const shard::Step&, const SimSequences* = nullptr);

// What rank 0 keeps of each sequence from the incremental steps: what its token draws need.
class SimSequences {
 public:
  struct Seq {
    shard::RequestId request = 0;
    std::uint32_t sample = 0;
    std::uint32_t prompt_len = 0;
    std::uint64_t seed = 0;
    bool logprobs = false;
    std::uint32_t top_logprobs = 0;
    std::uint32_t min_tokens = 0;
    std::vector<kv::TokenId> min_tokens_stop_ids;  // sorted
    std::vector<shard::LogitBias> logit_bias;      // sorted by token
    std::uint64_t draw_key = 0;  // the hash of (sim seed, seed, request) its draws start from
    std::int32_t prompt_logprobs = -1;  // SamplingParams::prompt_logprobs
    std::vector<kv::TokenId> prompt;    // kept only when prompt_logprobs >= 0
  };
  // The step's drops, then its additions (their draw keys made with `sim_seed`).
  void apply(const shard::Step&, std::uint64_t sim_seed);
  // Throws std::invalid_argument for a sequence never added (or dropped).
  const Seq& at(kv::SeqId) const;
  std::size_t size() const { return seqs_.size(); }

 private:
  std::unordered_map<kv::SeqId, Seq> seqs_;
};

// What rank 0 computes for a step, after folding its drops and additions into `seqs`: the
// sampled tokens and the modelled duration (>= 1 ns). Throws std::invalid_argument for work on
// a sequence `seqs` does not hold.
shard::StepResult simulate_step(const SimShardModel&, SimSequences& seqs, const shard::Step&);

// The token drawn for (seed, request, sample, position): a counter-based hash (splitmix64
// finalizer) mapped onto [0, vocab_size), moved to the next id when it would be `avoid` (the stop token).
kv::TokenId sim_token(std::uint64_t sim_seed, std::uint64_t request_seed, shard::RequestId request,
                      std::uint32_t sample, std::uint64_t position, std::uint32_t vocab_size,
                      std::int32_t avoid);

// One draw of a sequence that has `generated` tokens, honouring the sampling parameters that
// have a meaning without a model. The sim's draws are uniform, as if every logit were 0, over
// every token but the EOS, which only a positive logit bias makes drawable:
//   * logit_bias: a token of bias b weighs e^b against 1 for the others (so -100 bans it, +100
//     all but forces it); the draw is then the inverse CDF, over (biased tokens by id, then the
//     rest by id), of a uniform number from the same hash as sim_token;
//   * min_tokens: its stop ids are never drawn before then (moved to the next id, as the EOS);
//   * repetition_penalty divides or multiplies a logit of 0: no effect, exactly; temperature,
//     top-k/p, min-p and the presence and frequency penalties are not modelled.
// Without a bias it is sim_token's draw (the same tokens as before, logprob -log(vocab_size)).
struct SimDraw {
  kv::TokenId token = 0;
  float logprob = 0;
};
SimDraw sim_draw(const SimShardModel&, const SimSequences::Seq&, std::uint32_t sample, std::uint64_t position,
                 std::uint32_t generated);

}  // namespace actorlm::sim
