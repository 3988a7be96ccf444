#include "kernels/cpu/sampling.hpp"

#include "kernels/splitmix64.hpp"

#include <unordered_map>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace actorlm::kernels::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kMaxFloat = std::numeric_limits<float>::max();

// NaN counts as -inf, +inf as the largest finite float (see the header).
float clean(float x) { return std::isnan(x) ? kNegInf : std::min(x, kMaxFloat); }

// --- vectorised blocks ------------------------------------------------------------------------
// The vocabulary is walked in blocks of kBlock with GCC vector extensions (SSE2 on baseline
// x86-64): without -ffast-math the compiler vectorises neither expf nor a float max, and expf
// dominates a scalar pass (on the development machine the greedy pass over 49152 logits went
// from ~390 to ~110 us).

using v4f = float __attribute__((vector_size(16)));
using v4i = int32_t __attribute__((vector_size(16)));
constexpr std::size_t kLanes = 4;
constexpr std::size_t kBlock = 64;

[[gnu::always_inline]] inline v4f splat(float x) { return v4f{x, x, x, x}; }

[[gnu::always_inline]] inline v4f load(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[gnu::always_inline]] inline void store(float* p, v4f v) { std::memcpy(p, &v, sizeof v); }

[[gnu::always_inline]] inline v4f clean(v4f x) {
  x = x > splat(kMaxFloat) ? splat(kMaxFloat) : x;
  return x != x ? splat(kNegInf) : x;
}

// exp(x) for x <= 0 (or -inf), 0 where expf would be subnormal (x < -87.33). Cephes' expf:
// x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact n ln2), a degree-7 polynomial
// for exp(r), n added to the exponent bits. Relative error < 1e-7 over [-87.33, 0].
[[gnu::always_inline]] inline v4f exp_nonpositive(v4f x) {
  const v4i underflow = x < splat(-87.33f);
  x = underflow ? splat(-87.33f) : x;
  const v4f n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln2)
  v4f r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  v4f p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const v4f y = p * r * r + r + 1.0f;
  const v4i two_to_n = (__builtin_convertvector(n, v4i) + 127) << 23;
  return underflow ? splat(0.0f) : y * std::bit_cast<v4f>(two_to_n);
}

// Copies one block of logits (len <= kBlock), cleaned and padded with -inf. [kBlock]
void load_block(std::span<const float> logits, std::size_t start, float* block) {
  const std::size_t len = std::min(kBlock, logits.size() - start);
  std::memcpy(block, logits.data() + start, len * sizeof(float));
  std::fill(block + len, block + kBlock, kNegInf);
  for (std::size_t j = 0; j < kBlock; j += kLanes) store(block + j, clean(load(block + j)));
}

float horizontal_max(v4f v) { return std::max(std::max(v[0], v[1]), std::max(v[2], v[3])); }

// --- log-softmax statistics ------------------------------------------------------------------

// Max, argmax and sum of exp(x - max) of the cleaned logits in one pass: per block, the max
// first, the running sum rescaled when the max moves (as in online softmax), then the block's
// exps. The block maxima let later scans for the best few tokens skip most blocks.
struct RowStats {
  float max = kNegInf;
  double sum = 0;
  int32_t argmax = -1;           // < 0 when every logit is -inf
  std::vector<float> block_max;  // [ceil(vocab / kBlock)]

  double log_prob(float cleaned) const { return double(cleaned) - double(max) - std::log(sum); }
};

RowStats row_stats(std::span<const float> logits) {
  RowStats s;
  s.block_max.reserve((logits.size() + kBlock - 1) / kBlock);
  alignas(16) float block[kBlock];
  for (std::size_t start = 0; start < logits.size(); start += kBlock) {
    load_block(logits, start, block);
    v4f vmax = splat(kNegInf);
    for (std::size_t j = 0; j < kBlock; j += kLanes) {
      const v4f x = load(block + j);
      vmax = x > vmax ? x : vmax;
    }
    const float block_max = horizontal_max(vmax);
    s.block_max.push_back(block_max);
    if (block_max > s.max) {  // strict: ties keep the lowest id
      s.argmax = int32_t(start + std::size_t(std::find(block, block + kBlock, block_max) - block));
      s.sum *= std::exp(double(s.max) - double(block_max));
      s.max = block_max;
    }
    if (s.max == kNegInf) continue;  // nothing finite yet: every term is 0
    v4f sum = splat(0);
    for (std::size_t j = 0; j < kBlock; j += kLanes)
      sum += exp_nonpositive(load(block + j) - splat(s.max));
    s.sum += double(sum[0]) + double(sum[1]) + double(sum[2]) + double(sum[3]);
  }
  return s;
}

// --- ranking ---------------------------------------------------------------------------------

// A token in the ranking every filter, the draw and top_logprobs use: higher cleaned logit
// first (the same order as tempered probability, without the rounding ties that tempering can
// add), then lower id.
struct Candidate {
  float logit;   // cleaned raw logit
  float weight;  // exp((logit - max) / temperature), 1 for the best; 0 where not needed
  int32_t id;
  uint32_t bucket;  // MassRanking's bucket
};

bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The n best tokens of the row, best first. A heap of the best so far (its front the worst of
// them) takes one comparison per token, and whole blocks whose maximum cannot beat its front are
// skipped; a large n (> vocab / 16) takes a partial sort instead.
std::vector<Candidate> best_of(std::span<const float> logits, const RowStats& stats,
                               std::size_t n) {
  n = std::min(n, logits.size());
  std::vector<Candidate> best;
  if (n * 16 > logits.size()) {
    best.resize(logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i) best[i] = {clean(logits[i]), 0, int32_t(i), 0};
    std::partial_sort(best.begin(), best.begin() + std::ptrdiff_t(n), best.end(), ranks_before);
    best.resize(n);
    return best;
  }
  best.reserve(n);
  for (std::size_t b = 0; b < stats.block_max.size(); ++b) {
    // Later blocks hold later ids, which lose ties.
    if (best.size() == n && !(stats.block_max[b] > best.front().logit)) continue;
    const std::size_t end = std::min(logits.size(), (b + 1) * kBlock);
    for (std::size_t i = b * kBlock; i < end; ++i) {
      const Candidate c{clean(logits[i]), 0, int32_t(i), 0};
      if (best.size() < n) {
        best.push_back(c);
        std::push_heap(best.begin(), best.end(), ranks_before);
      } else if (ranks_before(c, best.front())) {
        std::pop_heap(best.begin(), best.end(), ranks_before);
        best.back() = c;
        std::push_heap(best.begin(), best.end(), ranks_before);
      }
    }
  }
  std::sort_heap(best.begin(), best.end(), ranks_before);
  return best;
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, const RowStats& stats,
                                       uint32_t count) {
  std::vector<TokenLogprob> top;
  if (count == 0) return top;
  for (const Candidate& c : best_of(logits, stats, count))
    top.push_back({c.id, float(stats.log_prob(c.logit))});
  return top;
}

// --- filtered draw ---------------------------------------------------------------------------

// Answers "which ranked prefix first reaches a given mass" over unordered candidates without
// sorting them: one pass files every candidate into a bucket by logit (equal-width buckets over
// the candidates' range, in ranking order; equal logits share one), prefix masses are walked per
// bucket, and only the bucket where the answer lies is gathered and sorted. O(n) plus one
// bucket's sort (all n only when nearly all logits are equal). A span that is `sorted` already,
// or small, is walked directly.
class MassRanking {
 public:
  MassRanking(std::span<Candidate> c, bool sorted) : c_(c), sorted_(sorted || c.size() <= 64) {
    if (sorted_) {
      if (!sorted) std::sort(c_.begin(), c_.end(), ranks_before);
      return;
    }
    float lo = c_.front().logit, hi = lo;
    for (const Candidate& x : c_) lo = std::min(lo, x.logit), hi = std::max(hi, x.logit);
    // ~8 candidates per bucket if spread evenly; double, as hi - lo may exceed the float range.
    const std::size_t buckets = std::min<std::size_t>(c_.size() / 8, kMaxBuckets);
    const double scale = hi > lo ? double(buckets - 1) / (double(hi) - double(lo)) : 0.0;
    mass_.assign(buckets, 0);
    count_.assign(buckets, 0);
    for (Candidate& x : c_) {
      x.bucket = std::min(uint32_t((double(hi) - double(x.logit)) * scale), uint32_t(buckets - 1));
      mass_[x.bucket] += x.weight;
      ++count_[x.bucket];
    }
  }

  struct Prefix {
    std::size_t count;  // ranked candidates in the prefix
    double mass;        // their total weight
    int32_t last;       // the id of the last one
  };

  // The shortest ranked prefix whose mass is >= target (> target when `strict`), but no longer
  // than `limit`; when rounding leaves the whole mass short of target, the prefix of `limit`.
  Prefix reaching(double target, bool strict, std::size_t limit) {
    limit = std::min(limit, c_.size());
    Prefix before{0, 0, -1};
    if (sorted_) {
      walk(c_, target, strict, limit, before);
      return before;
    }
    for (uint32_t b = 0; b < mass_.size() && before.count < limit; ++b) {
      if (count_[b] == 0) continue;
      if (!reached(before.mass + mass_[b], target, strict) && before.count + count_[b] < limit) {
        before.count += count_[b];
        before.mass += mass_[b];
        continue;
      }
      gathered_.clear();
      for (const Candidate& x : c_)
        if (x.bucket == b) gathered_.push_back(x);
      std::sort(gathered_.begin(), gathered_.end(), ranks_before);
      if (walk(gathered_, target, strict, limit, before)) break;
    }
    return before;
  }

 private:
  static bool reached(double mass, double target, bool strict) {
    return strict ? mass > target : mass >= target;
  }

  // Extends `prefix` along ranked `c`; true once it reaches target or limit.
  static bool walk(std::span<const Candidate> c, double target, bool strict, std::size_t limit,
                   Prefix& prefix) {
    for (const Candidate& x : c) {
      prefix.count += 1;
      prefix.mass += x.weight;
      prefix.last = x.id;
      if (reached(prefix.mass, target, strict) || prefix.count == limit) return true;
    }
    return false;
  }

  static constexpr std::size_t kMaxBuckets = 8192;
  std::span<Candidate> c_;
  bool sorted_;
  std::vector<double> mass_;     // [buckets]
  std::vector<uint32_t> count_;  // [buckets]
  std::vector<Candidate> gathered_;
};

// Every token of weight > 0 with its tempered weight exp((x - max) / T) <= 1, in id order;
// returns their total weight, summed in double one weight at a time (as every other mass here: a
// float sum per lane was ~1e-8 off, which moved the top-p cut and the draw's target enough to
// change one draw in a few thousand from what another summation order gives). Tokens whose weight
// underflows to 0 (-inf logits among them) are left out: they can never be drawn.
double all_candidates(std::span<const float> logits, float max, float temperature,
                      std::vector<Candidate>& out) {
  out.clear();
  double mass = 0;
  alignas(16) float block[kBlock];
  alignas(16) float weight[kBlock];
  for (std::size_t start = 0; start < logits.size(); start += kBlock) {
    load_block(logits, start, block);
    for (std::size_t j = 0; j < kBlock; j += kLanes) {
      const v4f t = (load(block + j) - splat(max)) / splat(temperature);
      store(weight + j, exp_nonpositive(t));
    }
    const std::size_t len = std::min(kBlock, logits.size() - start);
    for (std::size_t j = 0; j < len; ++j)
      if (weight[j] > 0) {
        out.push_back({block[j], weight[j], int32_t(start + j), 0});
        mass += double(weight[j]);
      }
  }
  return mass;
}

// Weights of a few candidates, computed as all_candidates does; drops those of weight 0.
double weigh(std::vector<Candidate>& c, float max, float temperature) {
  double mass = 0;
  for (Candidate& x : c) {
    x.weight = tempered_weight(x.logit, max, temperature);
    mass += x.weight;
  }
  std::erase_if(c, [](const Candidate& x) { return x.weight == 0; });
  return mass;
}

// The header's filters 1-3 and the inverse-CDF draw. Every kept set is a prefix of the ranking,
// so each filter only shortens `count`; `mass` is the total weight of that prefix.
int32_t draw(std::span<const float> logits, const SamplerParams& p, const RowStats& stats,
             double u) {
  thread_local std::vector<Candidate> scratch;  // [candidates], reused by each thread
  std::span<Candidate> kept;
  double mass = 0;
  bool sorted = false;
  // 1. top-k: a small k reads only its k best tokens; a large one selects among all.
  if (p.top_k > 0 && std::size_t(p.top_k) * 16 <= logits.size()) {
    scratch = best_of(logits, stats, std::size_t(p.top_k));
    mass = weigh(scratch, stats.max, p.temperature);
    kept = scratch;
    sorted = true;
  } else {
    mass = all_candidates(logits, stats.max, p.temperature, scratch);
    kept = scratch;
    if (p.top_k > 0 && std::size_t(p.top_k) < kept.size()) {
      const auto kth = kept.begin() + p.top_k;
      std::nth_element(kept.begin(), kth, kept.end(), ranks_before);
      kept = kept.first(std::size_t(p.top_k));
      mass = 0;
      for (const Candidate& c : kept) mass += c.weight;
    }
  }
  std::size_t count = kept.size();
  MassRanking ranking(kept, sorted);

  // 2. top-p, over the top-k distribution.
  if (p.top_p < 1) {
    const auto prefix = ranking.reaching(double(p.top_p) * mass, false, count);
    count = prefix.count;
    mass = prefix.mass;
  }
  // 3. min-p: the weights are relative to the best (= exp(0) = 1 exactly, so min_p <= 1 keeps
  // it), and {w >= min_p} is a prefix of the ranking, so counting it is enough.
  if (p.min_p > 0) {
    std::size_t above = 0;
    double above_mass = 0;
    for (const Candidate& c : kept)
      if (c.weight >= p.min_p) ++above, above_mass += c.weight;
    if (above > 0 && above < count) {
      count = above;
      mass = above_mass;
    }
  }
  return ranking.reaching(u * mass, true, count).last;
}

void check_params(std::span<const float> logits, const SamplerParams& p) {
  if (logits.empty()) throw std::invalid_argument("sample: empty logits row");
  if (logits.size() > std::size_t(std::numeric_limits<int32_t>::max()))
    throw std::invalid_argument("sample: vocabulary of " + std::to_string(logits.size()) +
                                " tokens does not fit int32 token ids");
  if (!(p.temperature >= 0))
    throw std::invalid_argument("sample: temperature must be >= 0, got " +
                                std::to_string(p.temperature));
  if (!(p.top_p > 0 && p.top_p <= 1))
    throw std::invalid_argument("sample: top_p must be in (0, 1], got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0 && p.min_p <= 1))
    throw std::invalid_argument("sample: min_p must be in [0, 1], got " + std::to_string(p.min_p));
}

}  // namespace

double counter_uniform(uint64_t seed, uint64_t stream, uint64_t position) {
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ position);
  return double(h >> 11) * 0x1.0p-53;
}

float tempered_weight(float x, float max, float temperature) {
  return exp_nonpositive(splat((x - max) / temperature))[0];
}

Sampled sample(std::span<const float> logits, const SamplerParams& p, uint64_t stream,
               uint64_t position) {
  check_params(logits, p);
  const RowStats stats = row_stats(logits);
  if (stats.argmax < 0) throw std::invalid_argument("sample: every logit is -inf or NaN");

  Sampled out;
  out.token = p.temperature < kGreedyTemperature
                  ? stats.argmax
                  : draw(logits, p, stats, counter_uniform(p.seed, stream, position));
  out.logprob = float(stats.log_prob(clean(logits[std::size_t(out.token)])));
  out.top = top_logprobs(logits, stats, p.top_logprobs);
  return out;
}

Scored score(std::span<const float> logits, int32_t token, uint32_t count) {
  if (token < 0 || std::size_t(token) >= logits.size())
    throw std::invalid_argument("score: token " + std::to_string(token) + " is outside the row of " +
                                std::to_string(logits.size()) + " logits");
  const RowStats stats = row_stats(logits);
  if (stats.argmax < 0) throw std::invalid_argument("score: every logit is -inf or NaN");
  const float own = clean(logits[std::size_t(token)]);
  uint32_t above = 0;
  for (float x : logits) above += clean(x) > own ? 1u : 0u;
  Scored s;
  s.token = token;
  s.logprob = float(stats.log_prob(own));
  s.top = top_logprobs(logits, stats, count);
  s.rank = above + 1;
  return s;
}

void apply_penalties(std::span<float> logits, std::span<const int32_t> generated, float presence,
                     float frequency) {
  std::unordered_map<int32_t, uint32_t> counts;
  for (int32_t t : generated)
    if (t >= 0 && static_cast<std::size_t>(t) < logits.size()) ++counts[t];
  for (const auto& [t, c] : counts) logits[static_cast<std::size_t>(t)] -= presence + float(c) * frequency;
}

void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> seen, float penalty) {
  if (penalty == 1.0f) return;
  std::vector<bool> done(logits.size(), false);  // each token once, however often it occurs
  for (int32_t t : seen) {
    if (t < 0 || static_cast<std::size_t>(t) >= logits.size() || done[static_cast<std::size_t>(t)]) continue;
    done[static_cast<std::size_t>(t)] = true;
    float& x = logits[static_cast<std::size_t>(t)];
    x = x > 0 ? x / penalty : x * penalty;
  }
}

void apply_logit_bias(std::span<float> logits, std::span<const TokenBias> bias) {
  for (const TokenBias& b : bias)
    if (b.token >= 0 && static_cast<std::size_t>(b.token) < logits.size()) logits[static_cast<std::size_t>(b.token)] += b.bias;
}

void mask_tokens(std::span<float> logits, std::span<const int32_t> tokens) {
  for (int32_t t : tokens)
    if (t >= 0 && static_cast<std::size_t>(t) < logits.size()) logits[static_cast<std::size_t>(t)] = kNegInf;
}

}  // namespace actorlm::kernels::cpu
