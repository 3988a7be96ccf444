#pragma once
// Greedy sampling on the GPU: for each row of f32 logits, the argmax (ties to the lowest id), its
// log-probability, and the row's `top_n[r]` most likely tokens with theirs, by the cpu sampler's
// rules (kernels/cpu/sampling.hpp: NaN as -inf, +inf as the largest float, ranking by logit
// desc, id asc), so that the cuda shard copies back a few numbers per row instead of the row.
// The per-element math is sampling_math.hpp's, which the CPU suite checks against the cpu
// sampler. One thread block per row.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace actorlm::kernels::cuda {

struct TokenLogprobPair {
  std::int32_t token;
  float logprob;
};

struct GreedySampleParams {
  const float* logits = nullptr;        // [rows, vocab]
  const std::int32_t* top_n = nullptr;  // [rows]: top log-probabilities wanted, each <= max_top
  std::int32_t* token = nullptr;        // [rows]: out; -1 when every logit of the row is -inf or NaN
  float* logprob = nullptr;             // [rows]: out
  TokenLogprobPair* top = nullptr;      // [rows, max_top]: out, the first top_n[r] of row r (token
                                        // -1 past the vocabulary; nothing for an all -inf row)
  std::int64_t rows = 0, vocab = 0;
  std::int32_t max_top = 0;             // <= 64
};

// One launch on `stream`. Throws std::invalid_argument for a null pointer, vocab outside
// [1, 2^31) or max_top above 64.
void greedy_sample(const GreedySampleParams&, cudaStream_t stream);

}  // namespace actorlm::kernels::cuda
