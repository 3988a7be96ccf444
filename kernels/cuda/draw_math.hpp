#pragma once
// The math of a filtered draw on the GPU (kernels/cuda/draw_sample.cu), written once for the
// device and the host, with the cpu sampler's semantics (kernels/cpu/sampling.hpp): tempered
// weights exp((x - max) / T) bit for bit as the cpu sampler computes them, then top-k, top-p,
// min-p and the inverse-CDF draw over the ranking (logit desc, id asc), each a prefix of it.
//
// No sort: every token gets a 64-bit rank key (the logit's order-preserving bits above the
// complement of its id: distinct keys, higher = ranks before), and each "shortest ranked prefix
// that reaches a count or a mass" is a radix descent over the keys, 8 bits a level: a pass over
// the row builds a 256-bin histogram (count and mass) of the candidates under the prefix fixed so
// far, the bins are walked from the top, and the one where the running total first reaches the
// goal is the next digit. A bin holding one candidate ends the descent (one more pass finds it).
// A `Pass` does the passes over the row: a thread block on the device, a plain loop on the host
// (the CPU suite runs draw_row with one against the cpu sampler). Masses are summed in doubles in
// whatever order the pass adds them, so the draw is the cpu sampler's except where its uniform
// number lands within rounding (~1e-15 relative) of a token's boundary.
//
// Bit-for-bit weights need IEEE float operations in the cpu sampler's order with no fused
// multiply-add: on the device the _rn intrinsics, on the host plain operations (the cpu sampler
// and its tests compile with -ffp-contract=off).

#include "kernels/cuda/host_device.hpp"
#include "kernels/cuda/sampling_math.hpp"

#include <cstdint>
#include <cstring>

namespace actorlm::kernels::cuda_math {

ACTORLM_HD inline float f_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
ACTORLM_HD inline float f_sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
ACTORLM_HD inline float f_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
ACTORLM_HD inline float f_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

ACTORLM_HD inline std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}

ACTORLM_HD inline float bits_float(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}

// exp(t) for t <= 0 (or -inf), 0 where it would be subnormal (t < -87.33): the cpu sampler's
// Cephes polynomial, operation for operation.
ACTORLM_HD inline float exp_nonpositive(float t) {
  if (!(t >= -87.33f)) return 0.0f;
  const float n = f_sub(f_add(f_mul(t, 1.44269504088896341f), 12582912.0f), 12582912.0f);  // round(t / ln2)
  float r = f_sub(t, f_mul(n, 0.693359375f));
  r = f_sub(r, f_mul(n, -2.12194440e-4f));
  float p = 1.9875691500e-4f;
  p = f_add(f_mul(p, r), 1.3981999507e-3f);
  p = f_add(f_mul(p, r), 8.3334519073e-3f);
  p = f_add(f_mul(p, r), 4.1665795894e-2f);
  p = f_add(f_mul(p, r), 1.6666665459e-1f);
  p = f_add(f_mul(p, r), 5.0000001201e-1f);
  const float y = f_add(f_add(f_mul(f_mul(p, r), r), r), 1.0f);
  const float two_to_n = bits_float(static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23);
  return f_mul(y, two_to_n);
}

// A cleaned logit's weight under temperature T relative to the row's best (max): 1 for the best,
// 0 for a token that can never be drawn.
ACTORLM_HD inline float tempered_weight(float x, float max, float temperature) {
  return exp_nonpositive(f_div(f_sub(x, max), temperature));
}

// The rank key of cleaned logit x of token id: higher keys rank before (higher logit, then lower
// id); -0 counts as +0 as in the cpu sampler's comparisons.
ACTORLM_HD inline std::uint64_t rank_key(float x, std::int32_t id) {
  const std::uint32_t b = float_bits(x == 0.0f ? 0.0f : x);
  const std::uint32_t ordered = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (std::uint64_t(ordered) << 32) | std::uint64_t(0xFFFFFFFFu - static_cast<std::uint32_t>(id));
}

ACTORLM_HD inline std::int32_t key_id(std::uint64_t key) {
  return static_cast<std::int32_t>(0xFFFFFFFFu - static_cast<std::uint32_t>(key));
}

// Whether a candidate's key lies under the prefix of `bits` high bits fixed so far (any key when
// bits is 0) and at or above `floor`.
ACTORLM_HD inline bool under_prefix(std::uint64_t key, std::uint64_t prefix, int bits, std::uint64_t floor) {
  return key >= floor && (bits == 0 || (key >> (64 - bits)) == prefix);
}

constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;

// One level's histogram: the candidates under the prefix by their next digit.
struct DrawHistogram {
  std::uint32_t count[kBins];
  double mass[kBins];
};

// The filters and the draw of one row (the Pass knows the row, its maximum and the temperature:
// the weights are tempered_weight(x, max, temperature) of the cleaned logits). `u` in [0, 1).
// Candidates are the tokens of weight > 0.
struct DrawParams {
  std::int32_t top_k;  // <= 0: off
  float top_p;         // 1: off
  float min_p;         // 0: off
  double u;
};

// A prefix of the ranking: its last candidate's key, its count and mass.
struct RankPrefix {
  bool found;  // false: the whole set did not reach the goal (count and mass are the whole set's)
  std::uint64_t key;
  std::uint64_t count;
  double mass;
};

struct CountMass {
  std::uint64_t count;
  double mass;
};

// The shortest prefix of the candidates at or above `floor` whose mass reaches `target` (exceeds
// it when `strict`) or whose count reaches `limit`. Pass provides:
//   void histogram(std::uint64_t floor, std::uint64_t prefix, int bits, int shift, DrawHistogram&)
//     fills the histogram of candidates under (prefix, bits, floor) by digit (key >> shift) & 255;
//   std::uint64_t find(std::uint64_t floor, std::uint64_t prefix, int bits)
//     the key of the one candidate under (prefix, bits, floor).
template <class Pass>
ACTORLM_HD RankPrefix shortest_prefix(Pass& pass, DrawHistogram& h, std::uint64_t floor, double target, bool strict,
                                      std::uint64_t limit) {
  std::uint64_t prefix = 0, count = 0;
  double mass = 0;
  for (int bits = 0; bits < 64; bits += kDigitBits) {
    const int shift = 64 - bits - kDigitBits;
    pass.histogram(floor, prefix, bits, shift, h);
    // Below the first level the bins split one that reached the goal, but their masses, summed
    // apart, may fall short of it by rounding: the last of them then ends the prefix.
    int lowest = 0;
    while (lowest < kBins - 1 && h.count[lowest] == 0) ++lowest;
    int digit = -1;
    for (int d = kBins - 1; d >= 0; --d) {
      if (h.count[d] == 0) continue;
      const std::uint64_t c = count + h.count[d];
      const double m = mass + h.mass[d];
      if ((strict ? m > target : m >= target) || c >= limit || (bits > 0 && d == lowest)) {
        digit = d;
        break;
      }
      count = c;
      mass = m;
    }
    if (digit < 0) return {false, 0, count, mass};  // the whole set falls short
    prefix = (prefix << kDigitBits) | std::uint64_t(digit);
    if (h.count[digit] == 1 || shift == 0) {
      const std::uint64_t key = shift == 0 ? prefix : pass.find(floor, prefix, bits + kDigitBits);
      return {true, key, count + 1, mass + h.mass[digit]};
    }
  }
  return {false, 0, count, mass};  // not reached: distinct keys end the descent at shift 0
}

// The token drawn from the row: top-k, then top-p over what top-k kept, then min-p, then the
// inverse-CDF draw with u, as kernels/cpu/sampling.hpp's draw. Pass also provides
//   CountMass at_least(std::uint64_t floor, float min_weight)
//     count and mass of the candidates at or above floor whose weight is >= min_weight.
// Returns -1 when the row has no candidate.
template <class Pass>
ACTORLM_HD std::int32_t draw_row(const DrawParams& p, Pass& pass, DrawHistogram& h) {
  std::uint64_t floor = 0;
  CountMass kept{0, 0};
  bool have_kept = false;
  if (p.top_k > 0) {
    const RankPrefix k = shortest_prefix(pass, h, 0, INFINITY, false, std::uint64_t(p.top_k));
    kept = {k.count, k.mass};
    have_kept = true;
    if (k.found) floor = k.key;
  }
  if (!have_kept) kept = pass.at_least(0, 0.0f);
  if (kept.count == 0) return -1;
  std::uint64_t count = kept.count;
  double mass = kept.mass;
  if (p.top_p < 1.0f) {
    const RankPrefix q = shortest_prefix(pass, h, floor, double(p.top_p) * mass, false, count);
    count = q.count;
    mass = q.mass;
  }
  if (p.min_p > 0.0f) {
    const CountMass above = pass.at_least(floor, p.min_p);
    if (above.count > 0 && above.count < count) {
      count = above.count;
      mass = above.mass;
    }
  }
  const RankPrefix drawn = shortest_prefix(pass, h, floor, p.u * mass, true, count);
  return drawn.found ? key_id(drawn.key) : -1;
}

}  // namespace actorlm::kernels::cuda_math
