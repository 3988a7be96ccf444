#include "kernels/cpu/model/paged_attention.hpp"

#include "kernels/cpu/model/half.hpp"
#include "kernels/cpu/model/vector_exp.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace actorlm::kernels::cpu {

void check_covered(const KvPlaneView& plane, std::span<const std::uint32_t> table, std::uint32_t end) {
  if (end == 0) return;
  const std::size_t blocks = (end - 1) / plane.block_size + 1;
  if (blocks > table.size())
    throw std::out_of_range("paged attention: block table of " + std::to_string(table.size()) +
                            " blocks does not cover position " + std::to_string(end - 1));
  for (std::size_t i = 0; i < blocks; ++i)
    if (table[i] >= plane.num_blocks)
      throw std::out_of_range("paged attention: block " + std::to_string(table[i]) +
                              " outside a cache of " + std::to_string(plane.num_blocks));
}

const char* to_string(KvDtype d) { return d == KvDtype::f16 ? "f16" : "f32"; }

void write_kv(const KvPlaneView& kp, const KvPlaneView& vp, std::span<const std::uint32_t> table,
              std::uint32_t first, std::uint32_t n, const float* k, const float* v,
              std::int64_t row_stride) {
  check_covered(kp, table, first + n);
  const auto hd = static_cast<std::size_t>(kp.head_dim);
  const auto to_half = best_half_kernels().to_half;
  for (std::uint32_t t = 0; t < n; ++t)
    for (std::int32_t h = 0; h < kp.kv_heads; ++h) {
      const float* ks = k + t * row_stride + std::int64_t(h) * kp.head_dim;
      const float* vs = v + t * row_stride + std::int64_t(h) * kp.head_dim;
      if (kp.dtype == KvDtype::f16) {
        to_half(ks, kp.at<std::uint16_t>(table, first + t, h), hd);
        to_half(vs, vp.at<std::uint16_t>(table, first + t, h), hd);
      } else {
        std::memcpy(kp.at<float>(table, first + t, h), ks, hd * sizeof(float));
        std::memcpy(vp.at<float>(table, first + t, h), vs, hd * sizeof(float));
      }
    }
}

namespace {

// The softmax's numerators in place, s[i] = exp(s[i] - max(s)), and their sum; mx = max(s).
float exp_shifted_portable(float* s, std::uint32_t n, float& mx) {
  mx = *std::max_element(s, s + n);
  float sum = 0;
  for (std::uint32_t i = 0; i < n; ++i) sum += (s[i] = std::exp(s[i] - mx));
  return sum;
}

#ifdef ACTORLM_VECTOR_EXP  // x86-64 with glibc (vector_exp.hpp)
// Eight lanes of exp per call (vector_exp.hpp) instead of one scalar call per position, which
// took a third of a decode step's attention over 1,024 positions.
__attribute__((target("avx2,fma"))) float exp_shifted_avx2(float* s, std::uint32_t n, float& mx) {
  std::uint32_t i = 0;
  __m256 m8 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (; i + 8 <= n; i += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(s + i));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m8);
  mx = *std::max_element(lanes, lanes + 8);
  for (; i < n; ++i) mx = std::max(mx, s[i]);
  const __m256 shift = _mm256_set1_ps(mx);
  __m256 acc = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(s + i), shift));
    _mm256_storeu_ps(s + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  _mm256_store_ps(lanes, acc);
  float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i) sum += (s[i] = std::exp(s[i] - mx));
  return sum;
}

const auto exp_shifted = cpu_has_avx2_fma() ? exp_shifted_avx2 : exp_shifted_portable;
#else
const auto exp_shifted = exp_shifted_portable;
#endif

}  // namespace

namespace {

// Query rows of one sequence per attention work item (a prefill's rows share the blocks).
constexpr std::uint32_t tile_rows = 4;

// Partials held at once by one call (4 MiB of floats), whatever its rows and context.
constexpr std::int64_t max_partial_floats = std::int64_t{1} << 20;

// The f32 and f16 planes' inner loops over the positions of one block (half.hpp): the same
// order of operations, f16 widened in registers, or once into floats for a group of heads.
struct FloatRows {
  using Element = float;
  const HalfKernels& k = best_half_kernels();
  void scores(const float* q, const float* x, std::int32_t rows, std::int32_t n, float scale, float* out) const {
    k.scores_f32(q, x, rows, n, scale, out);
  }
  void accumulate(const float* w, float inv, const float* v, std::int32_t rows, std::int32_t n, float* y) const {
    k.accumulate_f32(w, inv, v, rows, n, y);
  }
};
struct HalfRows {
  using Element = std::uint16_t;
  const HalfKernels& k = best_half_kernels();
  void scores(const float* q, const std::uint16_t* x, std::int32_t rows, std::int32_t n, float scale, float* out) const {
    k.scores(q, x, rows, n, scale, out);
  }
  void accumulate(const float* w, float inv, const std::uint16_t* v, std::int32_t rows, std::int32_t n, float* y) const {
    k.accumulate(w, inv, v, rows, n, y);
  }
};

// fn(rr, xb) once for one block's rows x of a KV head read by `heads` query heads: on the rows
// as stored for a single head; f16 rows shared by several heads are widened once into `wide`
// (exact, so the bits are the same) and fn runs the float loops on them.
template <class Rows, class E, class Fn>
void with_rows(const Rows& r, const E* x, std::int32_t rows, std::int32_t hd, std::int32_t heads, float* wide, Fn fn) {
  if constexpr (std::is_same_v<E, std::uint16_t>) {
    if (heads > 1) {
      r.k.to_float(x, wide, std::size_t(rows) * hd);
      fn(FloatRows{}, static_cast<const float*>(wide));
      return;
    }
  }
  fn(r, x);
}

// The query heads [begin, end) that read KV head g (j * kv_heads / q_heads == g).
struct HeadGroup {
  std::int32_t begin, end;
};
HeadGroup head_group(std::int32_t g, std::int32_t q_heads, std::int32_t kv_heads) {
  const auto first_of = [&](std::int32_t h) {  // the smallest j with j * kv_heads / q_heads >= h
    return static_cast<std::int32_t>((std::int64_t(h) * q_heads + kv_heads - 1) / kv_heads);
  };
  return {first_of(g), std::min(q_heads, first_of(g + 1))};
}

// Split-K attention (flash-decoding): the visible positions of a query row are cut into chunks
// of attention_chunk_positions (whole blocks), and one work item is (KV head, chunk, up to
// tile_rows query rows): the scores of every query head of the KV head's group over the chunk,
// read block by block so that a block of K (then of V) comes from memory (and an f16 block is
// widened) once for the whole group and all the item's rows, then the chunk's softmax numerators (with its own maximum) and their weighted sum of
// values. A second pass merges a row's chunks: out = sum_c e^(m_c - M) acc_c / sum_c e^(m_c - M) l_c.
// The chunks are fixed positions, so the arithmetic of a row does not depend on n, first, the
// pool or its scheduling.
template <class Rows>
void attend(const KvPlaneView& kp, const KvPlaneView& vp, std::span<const std::uint32_t> table,
            std::uint32_t first, std::uint32_t n, const float* q, std::int64_t row_stride,
            std::int32_t q_heads, float scale, float* out, ThreadPool* pool) {
  using E = typename Rows::Element;
  const Rows r;
  const std::int32_t hd = kp.head_dim, kv_heads = kp.kv_heads;
  const std::int64_t out_stride = std::int64_t(q_heads) * hd;
  const std::uint32_t bs = kp.block_size;
  const std::uint32_t chunk = std::max<std::uint32_t>(1, attention_chunk_positions / bs) * bs;
  const std::uint32_t chunks = (first + n + chunk - 1) / chunk;  // of the longest row
  std::int32_t group_max = 0;
  for (std::int32_t g = 0; g < kv_heads; ++g) {
    const HeadGroup hg = head_group(g, q_heads, kv_heads);
    group_max = std::max(group_max, hg.end - hg.begin);
  }
  const E* k_data = reinterpret_cast<const E*>(kp.data);
  const E* v_data = reinterpret_cast<const E*>(vp.data);
  // Per item and head of its group: [max, sum, acc[hd]]. The query rows go in tiles of nt rows
  // whose partials fit in max_partial_floats (a long prefill over a long context would
  // otherwise hold n * context / 128 rows' worth); a row's arithmetic is the same in any tile.
  const std::int64_t part_floats = hd + 2;
  const std::int64_t per_row = std::int64_t(kv_heads) * chunks * group_max * part_floats;
  const auto nt = static_cast<std::uint32_t>(std::clamp<std::int64_t>(max_partial_floats / per_row, 1, n));
  thread_local std::vector<float> partials;
  partials.resize(static_cast<std::size_t>(per_row * nt));
  float* const parts = partials.data();
  std::uint32_t t0 = 0, rows_now = 0;  // the tile: query rows [t0, t0 + rows_now)
  const auto item_of = [&](std::int32_t g, std::uint32_t c, std::uint32_t tt) {
    return (std::int64_t(g) * chunks + c) * rows_now + tt;
  };
  // Offset of (block b of the table, head g, slot 0) in either plane.
  const auto head_rows = [&](std::uint32_t pos, std::int32_t g) {
    return std::size_t(table[pos / bs]) * kp.block_elements() + std::size_t(g) * bs * std::size_t(hd);
  };
  // One work item: (KV head, chunk, up to tile_rows query rows of the tile), so that a block of
  // K or V is widened once for all of them; each row's arithmetic is what it is alone.
  std::uint32_t tiles = 0;
  const auto chunk_items = [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> scores, wide;
    scores.resize(std::size_t(tile_rows) * group_max * chunk);
    wide.resize(std::size_t(bs) * hd);
    for (std::int64_t item = begin; item < end; ++item) {
      const auto tile = static_cast<std::uint32_t>(item % tiles);
      const auto c = static_cast<std::uint32_t>(item / tiles % chunks);
      const auto g = static_cast<std::int32_t>(item / tiles / chunks);
      const std::uint32_t tt0 = tile * tile_rows, tt1 = std::min(rows_now, tt0 + tile_rows);
      const std::uint32_t p0 = c * chunk;
      // Causal: row t sees positions [0, first + t]; p1(t) ends its part of the chunk.
      const auto p1 = [&](std::uint32_t tt) { return std::min(first + t0 + tt + 1, p0 + chunk); };
      if (p0 >= first + t0 + tt1) continue;  // no row of the tile sees the chunk
      const std::uint32_t tt_begin = p0 >= first + t0 + 1 ? p0 - first - t0 : 0;  // the first row that does
      const std::uint32_t p_end = p1(tt1 - 1);
      const HeadGroup hg = head_group(g, q_heads, kv_heads);
      const std::int32_t heads = hg.end - hg.begin;
      const auto sc = [&](std::uint32_t tt, std::int32_t jj) {
        return scores.data() + (std::size_t(tt - tt0) * group_max + std::size_t(jj)) * chunk;
      };
      // fn(rr, xb, tt, rows, pos) for each block of the chunk in `plane` (widened once) and each
      // row tt of the tile that sees `rows` of the block's positions.
      const auto over_blocks = [&](const E* plane, auto&& fn) {
        for (std::uint32_t pos = p0; pos < p_end; pos += bs)
          with_rows(r, plane + head_rows(pos, g), static_cast<std::int32_t>(std::min(bs, p_end - pos)), hd, heads,
                    wide.data(), [&](const auto& rr, const auto* xb) {
                      for (std::uint32_t tt = std::max(tt0, tt_begin); tt < tt1; ++tt)
                        if (p1(tt) > pos) fn(rr, xb, tt, static_cast<std::int32_t>(std::min(bs, p1(tt) - pos)), pos);
                    });
      };
      over_blocks(k_data, [&](const auto& rr, const auto* kb, std::uint32_t tt, std::int32_t rows, std::uint32_t pos) {
        const float* qrow = q + std::int64_t(t0 + tt) * row_stride;
        for (std::int32_t jj = 0; jj < heads; ++jj)
          rr.scores(qrow + std::int64_t(hg.begin + jj) * hd, kb, rows, hd, scale, sc(tt, jj) + (pos - p0));
      });
      for (std::uint32_t tt = std::max(tt0, tt_begin); tt < tt1; ++tt) {
        float* part = parts + item_of(g, c, tt) * group_max * part_floats;
        for (std::int32_t jj = 0; jj < heads; ++jj) {
          float* pj = part + std::int64_t(jj) * part_floats;
          pj[1] = exp_shifted(sc(tt, jj), p1(tt) - p0, pj[0]);
          std::fill(pj + 2, pj + 2 + hd, 0.0f);
        }
      }
      over_blocks(v_data, [&](const auto& rr, const auto* vb, std::uint32_t tt, std::int32_t rows, std::uint32_t pos) {
        float* part = parts + item_of(g, c, tt) * group_max * part_floats;
        for (std::int32_t jj = 0; jj < heads; ++jj)
          rr.accumulate(sc(tt, jj) + (pos - p0), 1.0f, vb, rows, hd, part + std::int64_t(jj) * part_floats + 2);
      });
    }
  };
  // Merge of (query head j, query row t0 + tt): item = j * rows_now + tt.
  const auto merge = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t item = begin; item < end; ++item) {
      const auto j = static_cast<std::int32_t>(item / rows_now);
      const auto tt = static_cast<std::uint32_t>(item % rows_now), t = t0 + tt;
      const std::int32_t g = static_cast<std::int32_t>(std::int64_t(j) * kv_heads / q_heads);
      const std::int32_t jj = j - head_group(g, q_heads, kv_heads).begin;
      const std::uint32_t used = (first + t) / chunk + 1;
      const auto part = [&](std::uint32_t c) { return parts + (item_of(g, c, tt) * group_max + jj) * part_floats; };
      float mx = part(0)[0];
      for (std::uint32_t c = 1; c < used; ++c) mx = std::max(mx, part(c)[0]);
      float* o = out + std::int64_t(t) * out_stride + std::int64_t(j) * hd;
      std::fill(o, o + hd, 0.0f);
      float sum = 0;
      for (std::uint32_t c = 0; c < used; ++c) {
        const float* pc = part(c);
        const float f = std::exp(pc[0] - mx);
        sum += f * pc[1];
        for (std::int32_t d = 0; d < hd; ++d) o[d] += f * pc[2 + d];
      }
      const float inv = 1.0f / sum;
      for (std::int32_t d = 0; d < hd; ++d) o[d] *= inv;
    }
  };
  for (t0 = 0; t0 < n; t0 += rows_now) {
    rows_now = std::min(nt, n - t0);
    tiles = (rows_now + tile_rows - 1) / tile_rows;
    const std::int64_t items = std::int64_t(kv_heads) * chunks * tiles, merges = std::int64_t(q_heads) * rows_now;
    if (pool != nullptr) {
      pool->parallel_for(items, 1, chunk_items);
      pool->parallel_for(merges, 16, merge);
    } else {
      chunk_items(0, items);
      merge(0, merges);
    }
  }
}

}  // namespace

void paged_attention(const KvPlaneView& kp, const KvPlaneView& vp, std::span<const std::uint32_t> table,
                     std::uint32_t first, std::uint32_t n, const float* q, std::int64_t row_stride,
                     std::int32_t q_heads, float scale, float* out, ThreadPool* pool) {
  if (n == 0) return;
  check_covered(kp, table, first + n);
  if (kp.dtype != vp.dtype) throw std::invalid_argument("paged attention: K and V planes of different dtypes");
  switch (kp.dtype) {  // the one dispatch from the cache's dtype to the inner loops
    case KvDtype::f32: return attend<FloatRows>(kp, vp, table, first, n, q, row_stride, q_heads, scale, out, pool);
    case KvDtype::f16: return attend<HalfRows>(kp, vp, table, first, n, q, row_stride, q_heads, scale, out, pool);
  }
  throw std::invalid_argument("paged attention: unknown KV dtype");
}

}  // namespace actorlm::kernels::cpu
