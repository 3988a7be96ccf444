#include "kernels/cpu/model/paged_attention.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace actorlm::kernels::cpu {

namespace {

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

}  // namespace

void write_kv(const KvPlaneView& kp, const KvPlaneView& vp, std::span<const std::uint32_t> table,
              std::uint32_t first, std::uint32_t n, const float* k, const float* v,
              std::int64_t row_stride) {
  check_covered(kp, table, first + n);
  const std::size_t bytes = std::size_t(kp.head_dim) * sizeof(float);
  for (std::uint32_t t = 0; t < n; ++t)
    for (std::int32_t h = 0; h < kp.kv_heads; ++h) {
      std::memcpy(kp.at(table, first + t, h), k + t * row_stride + std::int64_t(h) * kp.head_dim, bytes);
      std::memcpy(vp.at(table, first + t, h), v + t * row_stride + std::int64_t(h) * kp.head_dim, bytes);
    }
}

void paged_attention(const KvPlaneView& kp, const KvPlaneView& vp, std::span<const std::uint32_t> table,
                     std::uint32_t first, std::uint32_t n, const float* q, std::int64_t row_stride,
                     std::int32_t q_heads, float scale, float* out, AttentionScratch& s) {
  if (n == 0) return;
  const std::uint32_t ctx = first + n;
  check_covered(kp, table, ctx);
  const std::int32_t hd = kp.head_dim;
  s.keys.resize(std::size_t(ctx) * hd);
  s.values.resize(std::size_t(ctx) * hd);
  s.scores.resize(std::size_t(n) * ctx);
  std::int32_t loaded = -1;  // the KV head gathered into keys/values
  for (std::int32_t j = 0; j < q_heads; ++j) {
    const std::int32_t kvh = j * kp.kv_heads / q_heads;
    if (kvh != loaded) {
      // Gather this head's keys and values into contiguous [ctx, head_dim] rows, block by block.
      for (std::uint32_t p = 0; p < ctx; p += kp.block_size) {
        const std::uint32_t len = std::min(kp.block_size, ctx - p);
        std::memcpy(&s.keys[std::size_t(p) * hd], kp.at(table, p, kvh), len * hd * sizeof(float));
        std::memcpy(&s.values[std::size_t(p) * hd], vp.at(table, p, kvh), len * hd * sizeof(float));
      }
      loaded = kvh;
    }
    // scores[n, ctx] = scale * Q_j[n, hd] . K[ctx, hd]^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(n),
                static_cast<blasint>(ctx), hd, scale, q + std::int64_t(j) * hd,
                static_cast<blasint>(row_stride), s.keys.data(), hd, 0.0f, s.scores.data(),
                static_cast<blasint>(ctx));
    for (std::uint32_t t = 0; t < n; ++t) {
      float* row = &s.scores[std::size_t(t) * ctx];
      const std::uint32_t visible = first + t + 1;  // causal: positions [0, first + t]
      const float mx = *std::max_element(row, row + visible);
      float sum = 0;
      for (std::uint32_t c = 0; c < visible; ++c) sum += (row[c] = std::exp(row[c] - mx));
      const float inv = 1.0f / sum;
      for (std::uint32_t c = 0; c < visible; ++c) row[c] *= inv;
      std::fill(row + visible, row + ctx, 0.0f);
    }
    // out_j[n, hd] = P[n, ctx] . V[ctx, hd]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(n), hd,
                static_cast<blasint>(ctx), 1.0f, s.scores.data(), static_cast<blasint>(ctx),
                s.values.data(), hd, 0.0f, out + std::int64_t(j) * hd,
                static_cast<blasint>(std::int64_t(q_heads) * hd));
  }
}

}  // namespace actorlm::kernels::cpu
