#pragma once
// Sampling on the GPU beyond the plain argmax (greedy_sample.hpp): the rows' logit edits (bias,
// min_tokens' mask, repetition and OpenAI penalties; logit_edit_math.hpp) applied in place, and
// draws under temperature, top-k, top-p and min-p with a uniform number from the host
// (kernels/cpu/sampling.hpp's counter_uniform of the sequence's seed, sample and position), by
// the cpu sampler's rules (draw_math.hpp): the same token for the same logits except where the
// number lands within rounding of a token's boundary. One thread block per row or draw; no sort
// and no workspace beyond shared memory.

#include "kernels/cuda/logit_edit_math.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace actorlm::kernels::cuda {

struct LogitEditParams {
  float* logits = nullptr;                      // [rows, vocab], changed in place
  const cuda_math::LogitEdit* edits = nullptr;  // row r's: [offsets[r], offsets[r + 1]), distinct tokens
  const std::int64_t* offsets = nullptr;        // [rows + 1]
  std::int64_t rows = 0, vocab = 0;
};

// One launch on `stream`; edits naming tokens outside the vocabulary are ignored. Throws
// std::invalid_argument for a null pointer or vocab outside [1, 2^31).
void apply_logit_edits(const LogitEditParams&, cudaStream_t stream);

struct DrawJob {
  double u;                // [0, 1): the draw's uniform number
  std::int32_t row;        // of the logits
  float temperature;       // >= 1e-5 (below is greedy: greedy_sample)
  std::int32_t top_k;      // <= 0: off
  float top_p;             // (0, 1]; 1: off
  float min_p;             // [0, 1]; 0: off
  std::int32_t unused = 0;
};

struct DrawSampleParams {
  const float* logits = nullptr;  // [rows, vocab]
  const DrawJob* jobs = nullptr;  // [draws]
  std::int32_t* token = nullptr;  // [draws]: out; -1 when every logit of the row is -inf or NaN
  float* logprob = nullptr;       // [draws]: out, of the token under the row's log-softmax
  std::int64_t draws = 0, vocab = 0;
};

// One launch on `stream`. Throws std::invalid_argument for a null pointer or vocab outside
// [1, 2^31).
void draw_sample(const DrawSampleParams&, cudaStream_t stream);

// out[i] = tempered_weight(x[i], max, temperature) ([n] each) as the draws compute it on the
// device: for the GPU test, which checks the bits against the cpu sampler's.
void tempered_weights(const float* x, float max, float temperature, float* out, std::int64_t n, cudaStream_t stream);

}  // namespace actorlm::kernels::cuda
