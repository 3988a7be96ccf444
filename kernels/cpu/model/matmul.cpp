#include "kernels/cpu/model/matmul.hpp"

#include <cblas.h>

#include <stdexcept>

namespace actorlm::kernels::cpu {

namespace {

// Rows per unit of the split: a few cache lines of output per thread, whole tiles of weights.
constexpr std::int64_t row_grain = 16;

void sgemm_rows(const MatmulParams& p, std::int64_t begin, std::int64_t end) {
  const std::int64_t k = p.w->cols, n = p.w->rows;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(p.m),
              static_cast<blasint>(end - begin), static_cast<blasint>(k), 1.0f, p.x, static_cast<blasint>(k),
              p.w->f32() + begin * k, static_cast<blasint>(k), 0.0f, p.y + begin, static_cast<blasint>(n));
}

}  // namespace

void matmul(const MatmulParams& p, ThreadPool& pool, std::vector<Q16Block>& xq) {
  const WeightMatrix& w = *p.w;
  if (p.m == 0 || w.rows == 0) return;
  if (w.dtype == model::DType::f32) {
    if (pool.size() == 1) sgemm_rows(p, 0, w.rows);
    else pool.parallel_for(w.rows, row_grain, [&](std::int64_t b, std::int64_t e) { sgemm_rows(p, b, e); });
    return;
  }
  const DotKernels& kernels = best_kernels();
  DotParams d;
  d.w = &w;
  d.m = p.m;
  d.x = p.x;
  d.y = p.y;
  d.ldy = w.rows;
  if (is_integer_type(w.dtype)) {
    const std::int64_t nb = w.cols / act_block;
    xq.resize(static_cast<std::size_t>(p.m * nb));
    pool.parallel_for(p.m, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) kernels.quantize(p.x + i * w.cols, w.cols, xq.data() + i * nb);
    });
    d.xq = xq.data();
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
