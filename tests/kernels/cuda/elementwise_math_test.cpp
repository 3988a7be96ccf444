// The cuda kernels' per-element math (kernels/cuda/elementwise_math.hpp), run on the host against
// the cpu backend's kernels, which the golden tests tie to HF transformers: applied in the cpu
// kernels' order, the norms, rotary and GELU give their bits, SiLU-and-mul is within a few ulp
// (the cpu path's vector exp), the slot mapping finds where write_kv put each position, and
// split-K partials merged by merge_weight give the cpu paged attention's output. Needs no GPU
// and no CUDA: this is what CI checks of the GPU's arithmetic.
#define BOOST_TEST_MODULE cuda_elementwise_math
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/model/ops.hpp"
#include "kernels/cpu/model/paged_attention.hpp"
#include "kernels/cuda/elementwise_math.hpp"
#include "tests/support/nan_max.hpp"
#include "tests/support/normal_floats.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace actorlm;
using actorlm::testing::nan_max;
using actorlm::testing::normal_floats;
namespace m = actorlm::kernels::cuda_math;
namespace cpu = actorlm::kernels::cpu;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rms_and_layer_norm_factors_give_the_cpu_kernels_bits) {
  const std::int64_t rows = 7, n = 576;
  const auto x = normal_floats(rows * n, 1, 3.0f), w = normal_floats(n, 2), b = normal_floats(n, 3);
  std::vector<float> want(x.size()), got(x.size());
  cpu::rms_norm(x.data(), rows, n, w.data(), 1e-5f, want.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;  // the cpu kernel sums in double; the GPU sums in f32 (the device test bounds it)
    for (std::int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    const float inv = m::rms_scale(static_cast<float>(ss / double(n)), 1e-5f);
    for (std::int64_t i = 0; i < n; ++i) got[r * n + i] = x[r * n + i] * inv * w[i];
  }
  BOOST_TEST(same_bits(got, want));

  cpu::layer_norm(x.data(), rows, n, w.data(), b.data(), 1e-5f, want.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += x[r * n + i];
    const double mean = sum / double(n);
    double var = 0;
    for (std::int64_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
    const float inv = m::layer_scale(static_cast<float>(var / double(n)), 1e-5f);
    const auto mu = static_cast<float>(mean);
    for (std::int64_t i = 0; i < n; ++i) got[r * n + i] = (x[r * n + i] - mu) * inv * w[i] + b[i];
  }
  BOOST_TEST(same_bits(got, want));
}

BOOST_AUTO_TEST_CASE(rotary_pairs_angles_and_rotation_give_the_cpu_kernels_bits) {
  for (const auto style : {model::RopeStyle::halves, model::RopeStyle::interleaved})
    for (const float factor : {1.0f, 4.0f}) {
      const std::int32_t heads = 3, hd = 64, half = hd / 2;
      const std::int64_t rows = 5, stride = heads * hd + 8;  // a row longer than its heads
      const std::vector<std::int32_t> positions{0, 1, 17, 511, 32767};
      auto want = normal_floats(rows * stride, 4);
      auto got = want;
      cpu::apply_rope(want.data(), rows, stride, heads, positions, {hd, 500000.0f, factor, style});
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int32_t h = 0; h < heads; ++h)
          for (std::int32_t i = 0; i < half; ++i) {
            float* v = got.data() + r * stride + h * hd;
            const auto pair = m::rope_pair(style == model::RopeStyle::halves, half, i);
            const float angle = m::rope_angle(positions[r], factor, m::rope_inv_freq(500000.0f, hd, i));
            m::rope_rotate(v[pair.a], v[pair.b], std::cos(angle), std::sin(angle));
          }
      BOOST_TEST(same_bits(got, want), "style " << int(style) << " factor " << factor);
    }
}

BOOST_AUTO_TEST_CASE(silu_mul_is_within_a_few_ulp_and_gelu_gives_the_cpu_kernels_bits) {
  const std::int64_t rows = 3, f = 1000;
  const auto gate_up = normal_floats(rows * 2 * f, 5, 4.0f);
  std::vector<float> want(rows * f);
  cpu::silu_mul(gate_up.data(), rows, f, want.data());
  double worst = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < f; ++c) {
      const float got = m::silu_mul(gate_up[r * 2 * f + c], gate_up[r * 2 * f + f + c]);
      const float w = want[r * f + c];
      worst = nan_max(worst, std::abs(double(got) - w) / std::max(1e-30, std::abs(double(w))));
    }
  BOOST_TEST_MESSAGE("silu_mul: worst relative difference " << worst);
  // 4 ulp (2^-23 each, relative): the cpu path's AVX2 exp is within 1 ulp, then a divide and a
  // multiply round once each.
  BOOST_TEST(worst <= 4 * 0x1p-23);

  auto g = normal_floats(4096, 6, 3.0f);
  std::vector<float> gelu_got(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) gelu_got[i] = m::gelu(g[i]);
  cpu::gelu(g.data(), static_cast<std::int64_t>(g.size()));
  BOOST_TEST(same_bits(gelu_got, g));
}

BOOST_AUTO_TEST_CASE(the_slot_mapping_and_plane_index_find_each_position_where_write_kv_put_it) {
  const std::int32_t kv_heads = 2, hd = 8;
  const std::uint32_t bs = 4, blocks = 9, n = 23;
  const std::vector<std::uint32_t> table{7, 2, 5, 0, 8, 3};
  std::vector<float> kmem(std::size_t(blocks) * bs * kv_heads * hd, -1.0f), vmem(kmem);
  const cpu::KvPlaneView kp{reinterpret_cast<std::byte*>(kmem.data()), blocks, kv_heads, bs, hd};
  const cpu::KvPlaneView vp{reinterpret_cast<std::byte*>(vmem.data()), blocks, kv_heads, bs, hd};
  const auto k = normal_floats(std::size_t(n) * kv_heads * hd, 7), v = normal_floats(k.size(), 8);
  cpu::write_kv(kp, vp, table, 0, n, k.data(), v.data(), kv_heads * hd);
  for (std::uint32_t p = 0; p < n; ++p) {
    const std::uint64_t slot = m::paged_slot(table.data(), bs, p);
    for (std::int32_t g = 0; g < kv_heads; ++g)
      for (std::int32_t d = 0; d < hd; ++d) {
        const std::uint64_t at = m::kv_plane_index(slot, bs, kv_heads, hd, g, d);
        BOOST_TEST(kmem[at] == k[(p * kv_heads + g) * hd + d]);
        BOOST_TEST(vmem[at] == v[(p * kv_heads + g) * hd + d]);
      }
  }
}

BOOST_AUTO_TEST_CASE(split_k_partials_merged_by_merge_weight_give_the_cpu_paged_attention) {
  // One decode row over 700 positions in chunks of 128, as the device's split-K pass cuts them.
  const std::int32_t hd = 64, q_heads = 3, kv_heads = 1;
  const std::uint32_t bs = 16, ctx = 700, blocks = (ctx + bs - 1) / bs, chunk = 128;
  std::vector<std::uint32_t> table(blocks);
  for (std::uint32_t i = 0; i < blocks; ++i) table[i] = blocks - 1 - i;
  std::vector<float> kmem(std::size_t(blocks) * bs * hd), vmem(kmem.size());
  const cpu::KvPlaneView kp{reinterpret_cast<std::byte*>(kmem.data()), blocks, kv_heads, bs, hd};
  const cpu::KvPlaneView vp{reinterpret_cast<std::byte*>(vmem.data()), blocks, kv_heads, bs, hd};
  const auto k = normal_floats(std::size_t(ctx) * hd, 9), v = normal_floats(k.size(), 10), q = normal_floats(q_heads * hd, 11);
  cpu::write_kv(kp, vp, table, 0, ctx, k.data(), v.data(), hd);
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> want(q_heads * hd);
  cpu::paged_attention(kp, vp, table, ctx - 1, 1, q.data(), q_heads * hd, q_heads, scale, want.data());

  double worst = 0;
  for (std::int32_t h = 0; h < q_heads; ++h) {
    std::vector<float> maxes, sums;
    std::vector<std::vector<float>> accs;
    for (std::uint32_t p0 = 0; p0 < ctx; p0 += chunk) {  // each chunk's partial, independently
      const std::uint32_t p1 = std::min(ctx, p0 + chunk);
      std::vector<float> s(p1 - p0);
      for (std::uint32_t p = p0; p < p1; ++p) {
        float dot = 0;
        for (std::int32_t d = 0; d < hd; ++d) dot += q[h * hd + d] * k[p * hd + d];
        s[p - p0] = dot * scale;
      }
      const float mx = *std::max_element(s.begin(), s.end());
      float l = 0;
      std::vector<float> acc(hd, 0.0f);
      for (std::uint32_t p = p0; p < p1; ++p) {
        const float e = std::exp(s[p - p0] - mx);
        l += e;
        for (std::int32_t d = 0; d < hd; ++d) acc[d] += e * v[p * hd + d];
      }
      maxes.push_back(mx);
      sums.push_back(l);
      accs.push_back(acc);
    }
    const float row_max = *std::max_element(maxes.begin(), maxes.end());
    float total = 0;
    std::vector<float> out(hd, 0.0f);
    for (std::size_t c = 0; c < maxes.size(); ++c) {
      const float wgt = m::merge_weight(maxes[c], row_max);
      total += wgt * sums[c];
      for (std::int32_t d = 0; d < hd; ++d) out[d] += wgt * accs[c][d];
    }
    for (std::int32_t d = 0; d < hd; ++d)
      worst = nan_max(worst, std::abs(double(out[d] / total) - want[h * hd + d]));
  }
  BOOST_TEST_MESSAGE("split-K merge: max abs difference " << worst);
  BOOST_TEST(worst < 2e-5);
}
