// The cuda element-wise kernels on a GPU against the cpu backend's kernels, for activations in
// f32, f16 and bf16: inputs rounded to the dtype on the host, the cpu kernel run on the rounded
// values, the GPU's output within the dtype's output rounding (plus f32 sums in another order).
// Needs a GPU: without one the binary exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_elementwise
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/model/ops.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "tests/support/device_acts.hpp"
#include "tests/support/gpu_test_main.hpp"
#include "tests/support/nan_max.hpp"
#include "tests/support/normal_floats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using namespace actorlm;
using actorlm::testing::nan_max;
using actorlm::testing::normal_floats;
using kernels::cuda::ActDtype;
using testing::DeviceActs;
using testing::DeviceArray;
using testing::rounded;
namespace cpu = actorlm::kernels::cpu;
namespace gpu = actorlm::kernels::cuda;

namespace {

const ActDtype dtypes[] = {ActDtype::f32, ActDtype::f16, ActDtype::bf16};

// Output rounding of one element of `d` (half an ulp, relative), plus f32 reassociation.
double tolerance(ActDtype d) { return d == ActDtype::f32 ? 2e-6 : d == ActDtype::f16 ? 1.0 / 1024 : 1.0 / 128; }

// Error relative to |want| + floor. In f32 the floor is 1, the size of the terms these kernels
// add: where they cancel (a layer norm's output against its bias, a rotation's two products,
// GELU's 1 + erf(x) for x << 0) the result keeps the terms' absolute rounding, a few ulps of 1;
// the device's expf / erff / sincosf also differ from glibc's by an ulp or two (seen on an H200:
// 1e-7 absolute on outputs near 0). In f16 / bf16 the output's own rounding dominates.
void check_close(const std::vector<float>& got, const std::vector<float>& want, ActDtype d, const char* what) {
  const double floor = d == ActDtype::f32 ? 1.0 : 1e-3;
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = nan_max(worst, std::abs(double(got[i]) - want[i]) / (std::abs(double(want[i])) + floor));
  BOOST_TEST_MESSAGE(what << " " << d << ": worst relative error " << worst);
  BOOST_TEST(worst <= tolerance(d), what << " " << d << ": " << worst);
}

}  // namespace

BOOST_DATA_TEST_CASE(rms_and_layer_norm_match_the_cpu_kernels, boost::unit_test::data::make(dtypes), d) {
  const std::int64_t rows = 9, n = 4096;
  const auto x = rounded(normal_floats(rows * n, 1, 2.0f), d);
  const auto w = normal_floats(n, 2), b = normal_floats(n, 3);
  DeviceArray<float> dw(w), db(b);
  {
    DeviceActs dx(x, d);
    gpu::rms_norm({dx.ptr, dw.ptr, dx.ptr, rows, n, 1e-5f, d}, nullptr);  // in place
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> want(x.size());
    cpu::rms_norm(x.data(), rows, n, w.data(), 1e-5f, want.data());
    check_close(dx.read(), want, d, "rms_norm");
  }
  DeviceActs dx(x, d), out(std::vector<float>(x.size()), d);
  gpu::layer_norm({dx.ptr, dw.ptr, db.ptr, out.ptr, rows, n, 1e-5f, d}, nullptr);
  ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> want(x.size());
  cpu::layer_norm(x.data(), rows, n, w.data(), b.data(), 1e-5f, want.data());
  check_close(out.read(), want, d, "layer_norm");
}

// The residual add fused into the next norm (the forward's add and norm in one launch) gives
// what add_in_place then the norm give, bit for bit: the stream's new values and the norm's.
BOOST_DATA_TEST_CASE(a_norm_with_the_residual_add_fused_gives_the_add_then_the_norm, boost::unit_test::data::make(dtypes),
                     d) {
  const std::int64_t rows = 7, n = 1000;
  const auto x = rounded(normal_floats(rows * n, 4, 1.0f), d), r = rounded(normal_floats(rows * n, 5, 3.0f), d);
  const auto w = normal_floats(n, 6), b = normal_floats(n, 7);
  DeviceArray<float> dw(w), db(b);
  for (const bool rms : {true, false}) {
    DeviceActs dx(x, d), fused_r(r, d), fused_out(std::vector<float>(x.size()), d);
    DeviceActs apart_r(r, d), apart_out(std::vector<float>(x.size()), d);
    if (rms) {
      gpu::rms_norm({dx.ptr, dw.ptr, fused_out.ptr, rows, n, 1e-5f, d, fused_r.ptr}, nullptr);
      gpu::add_in_place(apart_r.ptr, dx.ptr, rows * n, d, nullptr);
      gpu::rms_norm({apart_r.ptr, dw.ptr, apart_out.ptr, rows, n, 1e-5f, d}, nullptr);
    } else {
      gpu::layer_norm({dx.ptr, dw.ptr, db.ptr, fused_out.ptr, rows, n, 1e-5f, d, fused_r.ptr}, nullptr);
      gpu::add_in_place(apart_r.ptr, dx.ptr, rows * n, d, nullptr);
      gpu::layer_norm({apart_r.ptr, dw.ptr, db.ptr, apart_out.ptr, rows, n, 1e-5f, d}, nullptr);
    }
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got_r = fused_r.read(), want_r = apart_r.read();
    const auto got = fused_out.read(), want = apart_out.read();
    BOOST_TEST(std::memcmp(got_r.data(), want_r.data(), got_r.size() * sizeof(float)) == 0, (rms ? "rms" : "layer"));
    BOOST_TEST(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0, (rms ? "rms" : "layer"));
    BOOST_TEST((got_r != r));  // the stream did change
  }
}

BOOST_DATA_TEST_CASE(rotary_matches_the_cpu_kernel_for_both_pairings, boost::unit_test::data::make(dtypes), d) {
  for (const auto style : {model::RopeStyle::halves, model::RopeStyle::interleaved}) {
    const std::int32_t heads = 12, hd = 128;
    const std::int64_t rows = 33, stride = heads * hd + 256;
    std::vector<std::int32_t> positions(rows);
    for (std::int64_t r = 0; r < rows; ++r) positions[r] = static_cast<std::int32_t>(r * 997 % 8192);
    const auto x = rounded(normal_floats(rows * stride, 4), d);
    std::vector<float> inv(hd / 2);
    gpu::rope_inv_freq_table(10000.0f, hd, inv.data());
    DeviceActs dx(x, d);
    DeviceArray<std::int32_t> dpos(positions);
    DeviceArray<float> dinv(inv);
    gpu::apply_rope({dx.ptr, dpos.ptr, dinv.ptr, rows, stride, heads, hd, 2.0f, style == model::RopeStyle::halves, d}, nullptr);
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
    auto want = x;
    cpu::apply_rope(want.data(), rows, stride, heads, positions, {hd, 10000.0f, 2.0f, style});
    check_close(dx.read(), want, d, "rope");
  }
}

BOOST_DATA_TEST_CASE(silu_mul_and_gelu_match_the_cpu_kernels, boost::unit_test::data::make(dtypes), d) {
  const std::int64_t rows = 17, f = 5632;
  const auto gate_up = rounded(normal_floats(rows * 2 * f, 5, 3.0f), d);
  DeviceActs dg(gate_up, d), out(std::vector<float>(rows * f), d);
  gpu::silu_mul({dg.ptr, out.ptr, rows, f, d}, nullptr);
  ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> want(rows * f);
  cpu::silu_mul(gate_up.data(), rows, f, want.data());
  check_close(out.read(), want, d, "silu_mul");

  auto x = rounded(normal_floats(100003, 6, 3.0f), d);
  DeviceActs dx(x, d);
  gpu::gelu(dx.ptr, static_cast<std::int64_t>(x.size()), d, nullptr);
  ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
  cpu::gelu(x.data(), static_cast<std::int64_t>(x.size()));
  check_close(dx.read(), x, d, "gelu");
}

BOOST_AUTO_TEST_CASE(launches_refuse_what_they_cannot_run) {
  float* p = nullptr;
  ACTORLM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), 1024));
  const std::int32_t pos = 0;
  BOOST_CHECK_THROW(gpu::apply_rope({p, &pos, p, 1, 8, 1, 7, 1.0f, true, ActDtype::f32}, nullptr),
                    std::invalid_argument);  // odd head_dim
  BOOST_CHECK_THROW(gpu::apply_rope({p, &pos, p, 1, 8, 2, 8, 1.0f, true, ActDtype::f32}, nullptr),
                    std::invalid_argument);  // stride shorter than the heads
  BOOST_CHECK_THROW(gpu::rms_norm({nullptr, p, p, 1, 8, 1e-5f, ActDtype::f32}, nullptr), std::invalid_argument);
  BOOST_CHECK_THROW(gpu::layer_norm({p, p, p, p, 1, 8, 1e-5f, ActDtype::f32, p}, nullptr),
                    std::invalid_argument);  // out aliases the residual stream
  cudaFree(p);
}

