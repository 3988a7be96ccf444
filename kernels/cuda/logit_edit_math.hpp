#pragma once
// What a sequence's sampling parameters do to one token's logit before a draw, written once for
// the device (kernels/cuda/draw_sample.cu) and the host, in the host sampler's order
// (actors/shard/host_sampler.cpp, vLLM's): logit_bias added, min_tokens' stop ids masked, the
// repetition penalty, then presence + count * frequency subtracted. A row's edits name distinct
// tokens, so the device applies them in parallel. Float operations as the host's, no fused
// multiply-add, so the changed row has the host sampler's bits.

#include "kernels/cuda/draw_math.hpp"

#include <cstdint>

namespace actorlm::kernels::cuda_math {

struct LogitEdit {
  static constexpr std::uint32_t biased = 1, masked = 2;
  std::int32_t token;
  std::uint32_t flags;  // biased: `bias` is added first; masked: then the logit becomes -inf
  float bias;
  float repetition;     // then x > 0 ? x / r : x * r (1 when the token was not seen: no change)
  float subtract;       // then subtracted: presence + count * frequency (0 when not generated)
};

ACTORLM_HD inline float apply_logit_edit(float x, const LogitEdit& e) {
  if (e.flags & LogitEdit::biased) x = f_add(x, e.bias);  // only then: x + 0 would turn -0 into +0
  if (e.flags & LogitEdit::masked) x = -INFINITY;
  x = x > 0.0f ? f_div(x, e.repetition) : f_mul(x, e.repetition);
  return f_sub(x, e.subtract);
}

}  // namespace actorlm::kernels::cuda_math
