// The cuBLAS products (kernels/cuda/gemm.hpp) on a GPU against a double-precision product on the
// host, for f32, f16 and bf16 operands with f32 or same-dtype outputs, over shapes of a decode
// step (m = 1), a prefill chunk, and odd sizes. Error: ||got - ref|| / ||ref|| (Frobenius).
// Needs a GPU and libcublas: without a device the binary exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_gemm
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "kernels/cuda/gemm.hpp"
#include "tests/support/device_acts.hpp"
#include "tests/support/gpu_test_main.hpp"
#include "tests/support/normal_floats.hpp"

#include <cmath>
#include <tuple>
#include <vector>

using namespace actorlm;
namespace gpu = actorlm::kernels::cuda;
using gpu::ActDtype;
using testing::DeviceActs;
using testing::rounded;

namespace {

const ActDtype dtypes[] = {ActDtype::f32, ActDtype::f16, ActDtype::bf16};

// ref[m, n] = act[m, k] · weight[n, k]ᵀ in double.
std::vector<double> reference(const std::vector<float>& a, const std::vector<float>& w, std::int64_t m, std::int64_t n,
                              std::int64_t k) {
  std::vector<double> out(std::size_t(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t t = 0; t < k; ++t) s += double(a[std::size_t(i * k + t)]) * w[std::size_t(j * k + t)];
      out[std::size_t(i * n + j)] = s;
    }
  return out;
}

double relative_error(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    if (!std::isfinite(d)) return INFINITY;
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

// f32 accumulation over k <= 2048 in some order: ~sqrt(k) ulps; the output's own rounding on top.
double tolerance(ActDtype out) { return out == ActDtype::f32 ? 2e-5 : out == ActDtype::f16 ? 1e-3 : 6e-3; }

}  // namespace

BOOST_DATA_TEST_CASE(gemm_matches_a_double_reference, boost::unit_test::data::make(dtypes), in) {
  gpu::Blas blas(nullptr);
  for (const auto& [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 256, 512}, {7, 96, 200},
                                {64, 512, 2048}, {256, 128, 64}, {3, 5, 1}})
    for (const ActDtype out : {ActDtype::f32, in}) {
      const auto a = rounded(testing::normal_floats(std::size_t(m * k), 1), in);
      const auto w = rounded(testing::normal_floats(std::size_t(n * k), 2, 0.05f), in);
      DeviceActs da(a, in), dw(w, in), dc(std::vector<float>(std::size_t(m * n), NAN), out);  // NaN: every element written
      blas.gemm({da.ptr, dw.ptr, dc.ptr, m, n, k, in, out});
      ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
      const double err = relative_error(dc.read(), reference(a, w, m, n, k));
      BOOST_TEST(err <= tolerance(out), m << "x" << n << "x" << k << " in " << in << " out " << out << ": " << err);
      if (out == in) break;  // f32 in: one output dtype
    }
}

BOOST_AUTO_TEST_CASE(gemm_adds_to_the_output_with_beta) {
  gpu::Blas blas(nullptr);
  const std::int64_t m = 5, n = 33, k = 70;
  const auto a = rounded(testing::normal_floats(m * k, 3), ActDtype::bf16);
  const auto w = rounded(testing::normal_floats(n * k, 4), ActDtype::bf16);
  const auto c0 = testing::normal_floats(m * n, 5);
  DeviceActs da(a, ActDtype::bf16), dw(w, ActDtype::bf16), dc(c0, ActDtype::f32);
  gpu::GemmParams p{da.ptr, dw.ptr, dc.ptr, m, n, k, ActDtype::bf16, ActDtype::f32};
  p.alpha = 0.5f;
  p.beta = 1.0f;
  blas.gemm(p);
  ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
  auto ref = reference(a, w, m, n, k);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = 0.5 * ref[i] + c0[i];
  BOOST_TEST(relative_error(dc.read(), ref) <= 2e-5);
}

// A vocabulary-parallel rank writes its columns of the logits: out rows `out_stride` apart, the
// other columns untouched.
BOOST_AUTO_TEST_CASE(gemm_writes_rows_of_a_wider_output_and_leaves_the_other_columns) {
  gpu::Blas blas(nullptr);
  const std::int64_t m = 4, n = 24, k = 40, stride = 100, first = 37;
  const auto a = testing::normal_floats(m * k, 6);
  const auto w = testing::normal_floats(n * k, 7, 0.1f);
  const std::vector<float> c0(std::size_t(m * stride), 5.0f);
  DeviceActs da(a, ActDtype::f32), dw(w, ActDtype::f32), dc(c0, ActDtype::f32);
  gpu::GemmParams p{da.ptr, dw.ptr, static_cast<float*>(dc.ptr) + first, m, n, k, ActDtype::f32, ActDtype::f32};
  p.out_stride = stride;
  blas.gemm(p);
  ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = dc.read();
  const auto ref = reference(a, w, m, n, k);
  std::vector<float> mine;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < stride; ++j) {
      const float v = got[std::size_t(i * stride + j)];
      if (j >= first && j < first + n) mine.push_back(v);
      else BOOST_TEST(v == 5.0f, "row " << i << " column " << j);
    }
  BOOST_TEST(relative_error(mine, ref) <= tolerance(ActDtype::f32));
  p.out_stride = n - 1;
  BOOST_CHECK_THROW(blas.gemm(p), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(gemm_refuses_what_it_cannot_run) {
  gpu::Blas blas(nullptr);
  DeviceActs x(std::vector<float>(64, 1.0f), ActDtype::f16);
  BOOST_CHECK_THROW(blas.gemm({x.ptr, x.ptr, x.ptr, 0, 4, 4, ActDtype::f16, ActDtype::f16}), std::invalid_argument);
  BOOST_CHECK_THROW(blas.gemm({x.ptr, x.ptr, x.ptr, 4, 4, 4, ActDtype::f16, ActDtype::bf16}), std::invalid_argument);
  BOOST_CHECK_THROW(blas.gemm({nullptr, x.ptr, x.ptr, 4, 4, 4, ActDtype::f16, ActDtype::f16}), std::invalid_argument);
}
