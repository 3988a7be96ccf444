#pragma once
// The per-element math of greedy sampling on the GPU (kernels/cuda/greedy_sample.cu), written
// once for the device and the host, with the cpu sampler's semantics (kernels/cpu/sampling.hpp):
// NaN logits count as -inf and +inf as the largest float; the argmax breaks ties to the lowest
// id; log-probabilities are those of the row's log-softmax; top log-probabilities follow the
// ranking (logit desc, id asc). A row is reduced in any split: partials of parts of the row are
// merged in any order (online softmax), which the CPU test suite checks against the cpu sampler.
// Plain C++ when compiled without nvcc.

#include "kernels/cuda/host_device.hpp"

#include <cfloat>
#include <cmath>
#include <cstdint>

namespace actorlm::kernels::cuda_math {

ACTORLM_HD inline float clean_logit(float x) { return x != x ? -INFINITY : (x > FLT_MAX ? FLT_MAX : x); }

// Whether token (a, ia) ranks before (b, ib): higher logit, then lower id.
ACTORLM_HD inline bool ranks_before(float a, std::int32_t ia, float b, std::int32_t ib) {
  return a > b || (a == b && ia < ib);
}

// Max, argmax and sum of exp(x - max) over a part of a row of cleaned logits. argmax < 0: every
// logit of the part is -inf (it adds nothing).
struct SoftmaxPartial {
  float max;
  std::int32_t argmax;
  double sum;
};

ACTORLM_HD inline SoftmaxPartial softmax_empty() { return {-INFINITY, -1, 0.0}; }

// Adds cleaned logit x of token i.
ACTORLM_HD inline void softmax_add(SoftmaxPartial& p, float x, std::int32_t i) {
  if (x == -INFINITY) return;
  if (p.argmax < 0 || x > p.max) {
    p.sum = (p.argmax < 0 ? 0.0 : p.sum * exp(double(p.max) - double(x))) + 1.0;
    p.max = x;
    p.argmax = i;
  } else {
    if (x == p.max && i < p.argmax) p.argmax = i;
    p.sum += exp(double(x) - double(p.max));
  }
}

ACTORLM_HD inline SoftmaxPartial softmax_merge(const SoftmaxPartial& a, const SoftmaxPartial& b) {
  if (a.argmax < 0) return b;
  if (b.argmax < 0) return a;
  const float m = a.max > b.max ? a.max : b.max;
  SoftmaxPartial out;
  out.max = m;
  out.sum = a.sum * exp(double(a.max) - double(m)) + b.sum * exp(double(b.max) - double(m));
  out.argmax = ranks_before(a.max, a.argmax, b.max, b.argmax) ? a.argmax : b.argmax;
  return out;
}

// log p(x) under the row whose partial is `row` (x cleaned).
ACTORLM_HD inline double log_prob(const SoftmaxPartial& row, float x) {
  return double(x) - double(row.max) - log(row.sum);
}

// The best token (value, id) of a part that ranks after (after_value, after_id): the next of a
// top-N list, found by one pass per entry (the first entry ranks after (+inf, -1), which every
// cleaned logit does). id < 0: none.
struct Best {
  float value;
  std::int32_t id;
};

ACTORLM_HD inline Best best_none() { return {-INFINITY, -1}; }

ACTORLM_HD inline void best_add(Best& b, float x, std::int32_t i, float after_value, std::int32_t after_id) {
  if (!ranks_before(after_value, after_id, x, i)) return;  // not after the previous entry
  if (b.id < 0 || ranks_before(x, i, b.value, b.id)) b = {x, i};
}

ACTORLM_HD inline Best best_merge(const Best& a, const Best& b) {
  if (a.id < 0) return b;
  if (b.id < 0) return a;
  return ranks_before(a.value, a.id, b.value, b.id) ? a : b;
}

}  // namespace actorlm::kernels::cuda_math
