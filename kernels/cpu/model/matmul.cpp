#include "kernels/cpu/model/matmul.hpp"

#include <cblas.h>

#include <algorithm>
#include <span>
#include <stdexcept>

namespace actorlm::kernels::cpu {

namespace {

// Rows per unit of the split: a few cache lines of output per thread, whole tiles of weights.
constexpr std::int64_t row_grain = 16;
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
void panel_rows(const DotKernels& kernels, const float* x, std::int64_t m, const WeightMatrix& w,
                std::int64_t begin, std::int64_t end, float* y) {
  thread_local std::vector<float> panel;
  const std::int64_t k = w.cols, rows = std::max<std::int64_t>(8, 65536 / k);
  panel.resize(static_cast<std::size_t>(rows * k));
  for (std::int64_t r0 = begin; r0 < end; r0 += rows) {
    const std::int64_t r1 = std::min(end, r0 + rows);
    for (std::int64_t r = r0; r < r1; ++r)
      kernels.dequantize(w.dtype, w.row(r), k, panel.data() + (r - r0) * k);
    sgemm(x, m, k, panel.data(), r0, r1, y, w.rows);
  }
}

}  // namespace

void matmul(const MatmulParams& p, ThreadPool& pool, MatmulScratch& scratch) {
  std::vector<Q16Block>& xq = scratch.xq;
  const WeightMatrix& w = *p.w;
  if (p.m == 0 || w.rows == 0) return;
  const std::int64_t k = w.cols;
  if (w.dtype == model::DType::f32) {
    const auto rows = [&](std::int64_t b, std::int64_t e) { sgemm(p.x, p.m, k, w.f32() + b * k, b, e, p.y, w.rows); };
    if (pool.size() == 1) rows(0, w.rows);
    else pool.parallel_for(w.rows, row_grain, rows, 1);
    return;
  }
  const DotKernels& kernels = best_kernels();
  DotParams d;
  d.w = &w;
  d.m = p.m;
  d.x = p.x;
  d.y = p.y;
  d.ldy = w.rows;
  const bool gemm = p.m >= p.panel_min_rows;
  if (is_integer_type(w.dtype)) {
    // The float GEMM multiplies the same activations as the kernels: for integer weights the
    // 16-bit codes times their scales, so a row's logits barely depend on which path it took.
    const std::int64_t nb = k / act_block;
    xq.resize(static_cast<std::size_t>(p.m * nb));
    if (gemm) scratch.xf.resize(static_cast<std::size_t>(p.m * k));
    pool.parallel_for(p.m, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        Q16Block* blocks = xq.data() + i * nb;
        kernels.quantize(p.x + i * k, k, blocks);
        if (!gemm) continue;
        float* xf = scratch.xf.data() + i * k;
        for (std::int64_t j = 0; j < k; ++j) xf[j] = static_cast<float>(blocks[j / act_block].q[j % act_block]) * blocks[j / act_block].d;
      }
    });
    d.xq = xq.data();
  }
  if (gemm) {
    const float* x = is_integer_type(w.dtype) ? scratch.xf.data() : p.x;
    if (w.rows * k <= whole_matrix_floats) {
      // The whole matrix dequantized once (on the pool), then each thread multiplies its share
      // of the activation rows by all of it: one large sgemm per thread, as OpenBLAS would
      // split it itself, and the float matrix stays in the last-level cache.
      scratch.wf.resize(static_cast<std::size_t>(w.rows * k));
      pool.parallel_for(w.rows, row_grain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t r = b; r < e; ++r) kernels.dequantize(w.dtype, w.row(r), k, scratch.wf.data() + r * k);
      });
      pool.parallel_for(p.m, 4, [&](std::int64_t b, std::int64_t e) {
        sgemm(x + b * k, e - b, k, scratch.wf.data(), 0, w.rows, p.y + b * w.rows, w.rows);
      }, 1);
    } else {
      pool.parallel_for(w.rows, row_grain, [&](std::int64_t b, std::int64_t e) { panel_rows(kernels, x, p.m, w, b, e, p.y); }, 1);
    }
    return;
  }
  const DotKernel kernel = kernels.for_type(w.dtype);
  if (kernel == nullptr) throw std::logic_error("matmul: no kernel for weights of this type");
  pool.parallel_for(w.rows, row_grain, [&](std::int64_t b, std::int64_t e) {
    DotParams part = d;
    part.row_begin = b;
    part.row_end = e;
    kernel(part);
  });
}

}  // namespace actorlm::kernels::cpu
