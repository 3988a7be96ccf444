#include "kernels/cpu/model/matmul.hpp"

#include "kernels/cpu/model/row_groups.hpp"

#include <cblas.h>

#include <algorithm>
#include <span>
#include <stdexcept>

namespace actorlm::kernels::cpu {

namespace {

// Rows per unit of the split: a few cache lines of output per thread, whole groups of weights.
constexpr std::int64_t row_grain = row_group;
// Matrices up to this many weights are dequantized whole for many activation rows (16 MiB of
// floats: every layer matrix of a small model; not a 49k-token vocabulary's output matrix).
constexpr std::int64_t whole_matrix_floats = std::int64_t{1} << 22;

// y[:, begin:end] = x . w[begin:end]^T for float rows w (row stride k).
void sgemm(const float* x, std::int64_t m, std::int64_t k, const float* w, std::int64_t begin,
           std::int64_t end, float* y, std::int64_t ldy) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(end - begin),
              static_cast<blasint>(k), 1.0f, x, static_cast<blasint>(k), w, static_cast<blasint>(k), 0.0f, y + begin,
              static_cast<blasint>(ldy));
}

// Rows [begin, end) of a stored matrix, dequantized a panel at a time (one that fits in L2:
// 256 KiB of floats) and multiplied by OpenBLAS: for a matrix too large to dequantize whole.
void panel_rows(const float* x, std::int64_t m, const WeightMatrix& w, std::int64_t begin, std::int64_t end,
                float* y) {
  thread_local std::vector<float> panel;
  const std::int64_t k = w.cols, rows = std::max<std::int64_t>(8, 65536 / k);
  panel.resize(static_cast<std::size_t>(rows * k));
  for (std::int64_t r0 = begin; r0 < end; r0 += rows) {
    const std::int64_t r1 = std::min(end, r0 + rows);
    for (std::int64_t r = r0; r < r1; ++r) w.dequantize_row(r, std::span<float>(panel.data() + (r - r0) * k, static_cast<std::size_t>(k)));
    sgemm(x, m, k, panel.data(), r0, r1, y, w.rows);
  }
}

// F16 / BF16 weights for many activation rows: dequantized, then sgemm.
void half_gemm(const MatmulParams& p, ThreadPool& pool, MatmulScratch& scratch) {
  const WeightMatrix& w = *p.w;
  const std::int64_t k = w.cols;
  if (w.rows * k <= whole_matrix_floats) {
    // The whole matrix dequantized once (on the pool), then each thread multiplies its share of
    // the activation rows by all of it: one large sgemm per thread, as OpenBLAS would split it
    // itself, and the float matrix stays in the last-level cache.
    scratch.wf.resize(static_cast<std::size_t>(w.rows * k));
    pool.parallel_for(w.rows, row_grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) w.dequantize_row(r, std::span<float>(scratch.wf.data() + r * k, static_cast<std::size_t>(k)));
    });
    pool.parallel_for(p.m, 4, [&](std::int64_t b, std::int64_t e) {
      sgemm(p.x + b * k, e - b, k, scratch.wf.data(), 0, w.rows, p.y + b * w.rows, w.rows);
    }, 1);
    return;
  }
  pool.parallel_for(w.rows, row_grain, [&](std::int64_t b, std::int64_t e) { panel_rows(p.x, p.m, w, b, e, p.y); }, 1);
}

}  // namespace

void matmul(const MatmulParams& p, ThreadPool& pool, MatmulScratch& scratch) {
  const WeightMatrix& w = *p.w;
  if (p.m == 0 || w.rows == 0) return;
  const std::int64_t k = w.cols;
  if (w.dtype == model::DType::f32) {
    const auto rows = [&](std::int64_t b, std::int64_t e) { sgemm(p.x, p.m, k, w.f32() + b * k, b, e, p.y, w.rows); };
    if (pool.size() == 1) rows(0, w.rows);
    else pool.parallel_for(w.rows, row_grain, rows, 1);
    return;
  }
  const bool integer = is_integer_type(w.dtype);
  if (integer && !w.grouped) throw std::logic_error("matmul: integer weights must be grouped (row_groups.hpp)");
  if (!integer && p.m >= p.panel_min_rows) {
    half_gemm(p, pool, scratch);
    return;
  }
  const DotKernels& kernels = best_kernels();
  const DotKernel kernel = kernels.for_type(w.dtype);
  if (kernel == nullptr) throw std::logic_error("matmul: no kernel for weights of this type");
  DotParams d;
  d.w = &w;
  d.m = p.m;
  d.x = p.x;
  d.y = p.y;
  d.ldy = w.rows;
  if (integer) {
    scratch.xq.resize(tiled_blocks(p.m, k));
    pool.parallel_for(p.m, 1, [&](std::int64_t b, std::int64_t e) { quantize_rows(kernels, p.x, k, b, e, scratch.xq.data()); });
    d.xq = scratch.xq.data();
  }
  // Integer kernels take whole groups of 16 rows: the split is by groups (the last one short).
  const std::int64_t units = integer ? (w.rows + row_group - 1) / row_group : w.rows;
  pool.parallel_for(units, integer ? 1 : row_grain, [&](std::int64_t b, std::int64_t e) {
    DotParams part = d;
    part.row_begin = integer ? b * row_group : b;
    part.row_end = integer ? std::min(w.rows, e * row_group) : e;
    kernel(part);
  });
}

}  // namespace actorlm::kernels::cpu
