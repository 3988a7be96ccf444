#pragma once
// Next-token sampling from one row of logits, on host memory.
//
// Semantics (vLLM's conventions; the filter order is top-k, top-p, min-p, where vLLM applies
// min-p first: the two differ only in the distribution top-p accumulates over):
//   * Input cleaning: NaN logits count as -inf; +inf logits count as the largest finite float
//     (so they take all the probability mass, shared among ties). Tokens at -inf have probability 0
//     and are never drawn.
//   * temperature < 1e-5 (including 0) is greedy: the argmax, ties to the lowest token id; top-k,
//     top-p, min-p and the seed are then irrelevant. One pass over the vocabulary.
//   * Otherwise the logits are divided by the temperature and filtered, each step on the
//     distribution renormalised over what the previous step kept:
//       1. top-k (top_k > 0): the top_k tokens of highest probability; top_k <= 0 keeps all;
//       2. top-p (top_p < 1): the smallest set of highest-probability tokens whose cumulative
//          probability is >= top_p (at least one token);
//       3. min-p (min_p > 0): drops tokens whose probability is < min_p * the highest probability.
//     All three rank tokens by (logit desc, token id asc) — the order of probability, without
//     the rounding ties tempering can add — so ties at a boundary keep the lower ids. The kept
//     tokens are renormalised and one is drawn by inverse CDF over that same order, with a
//     uniform number from counter_uniform(seed, stream, position).
//   * Reproducibility: the token depends only on (logits, params, stream, position) — not on the
//     rest of a batch, the order of calls or the thread. `stream` is typically the request or
//     sequence id, `position` the index of the token being generated.
//   * Reported log-probabilities are those of the unmodified logits' log-softmax (no temperature,
//     no filtering), as OpenAI and vLLM report by default: `logprob` of the chosen token and, in
//     `top`, the `top_logprobs` most likely tokens of that distribution, by (logprob desc, id asc).
//     Accuracy: within ~1e-6 + 2e-7 |logprob| of an exact log-softmax.
//
// Errors: std::invalid_argument for an empty row, a row where every logit is -inf or NaN, a row
// longer than INT32_MAX, or parameters out of range (temperature < 0 or NaN, top_p outside (0, 1],
// min_p outside [0, 1]).
//
// Cost for vocab V, all O(V) with no sort of the vocabulary: greedy is one vectorised pass (max,
// argmax and the log-softmax sum together); sampling adds one pass for the tempered weights and,
// without a small top-k, a bucketed search for the top-p cut and the draw that sorts one bucket.
// A top_k or top_logprobs of at most V / 16 only reads blocks whose maximum can still compete.
// Thread-safe; each thread reuses its own scratch buffer.

#include <cstdint>
#include <span>
#include <vector>

namespace actorlm::kernels::cpu {

struct SamplerParams {
  float temperature = 1;
  float top_p = 1;
  int32_t top_k = 0;  // <= 0: no top-k
  float min_p = 0;
  uint64_t seed = 0;
  uint32_t top_logprobs = 0;  // how many alternatives to report; capped at the vocabulary size
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct Sampled {
  int32_t token;
  float logprob;                  // of `token` under the unmodified logits' log-softmax
  std::vector<TokenLogprob> top;  // [min(top_logprobs, vocab)], logprob desc, id asc
};

// Temperatures below this are greedy.
inline constexpr float kGreedyTemperature = 1e-5f;

// logits: [vocab].
Sampled sample(std::span<const float> logits, const SamplerParams& p, uint64_t stream,
               uint64_t position);

// What score() reports: a token's log-probability and the alternatives, as Sampled, and its rank.
struct Scored : Sampled {
  uint32_t rank = 0;  // 1 + the tokens with a higher logit (vLLM's rank: 1 for the most likely)
};

// A given token's log-probability under the row's log-softmax, its rank, and the `top_logprobs`
// most likely tokens, exactly as sample() reports them (prompt log-probabilities: the token is
// the prompt's next one, not a draw). Errors: std::invalid_argument for an empty row, a token
// outside it, or a row of only -inf or NaN.
Scored score(std::span<const float> logits, int32_t token, uint32_t top_logprobs);

// Logit processing before a draw, each in place on one row (logits: [vocab]; ids outside it are
// ignored). A caller applies them in vLLM's order: the bias and the mask (its logits
// processors), then the repetition, presence and frequency penalties.

// OpenAI's repetition penalties: every token id t that occurs c > 0 times in `generated` loses
// presence + c * frequency from its logit.
void apply_penalties(std::span<float> logits, std::span<const int32_t> generated, float presence,
                     float frequency);

// HF's and vLLM's repetition penalty (CTRL's, Keskar et al. 2019): the logit x of every token id
// that occurs in `seen` (prompt and output) becomes x / penalty when x > 0, x * penalty
// otherwise, so penalty > 1 discourages repeats whatever the logit's sign. penalty > 0.
void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> seen, float penalty);

struct TokenBias {
  int32_t token;
  float bias;
};
// OpenAI's logit_bias: `bias` added to its token's logit (-100 bans a token in practice,
// +100 all but forces it).
void apply_logit_bias(std::span<float> logits, std::span<const TokenBias> bias);

// Sets the listed tokens' logits to -inf: they cannot be drawn (min_tokens' stop tokens).
void mask_tokens(std::span<float> logits, std::span<const int32_t> tokens);

// The weight exp((x - max) / temperature) of cleaned logit x that the draw ranks and sums (0
// where it would be subnormal): exposed so that another backend can check it computes the same
// bits (kernels/cuda/draw_math.hpp).
float tempered_weight(float x, float max, float temperature);

// The uniform number in [0, 1) behind a draw: splitmix64 chained over (seed, stream, position),
// top 53 bits. Exposed so that another backend can reproduce the same draws.
double counter_uniform(uint64_t seed, uint64_t stream, uint64_t position);

}  // namespace actorlm::kernels::cpu
