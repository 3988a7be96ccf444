// float <-> f16 conversion for the KV cache: the scalar and F16C versions agree bit for bit
// (random bit patterns: normals, subnormals, infinities, NaNs; and every one of the 65,536
// halves), rounding is to nearest even, and a half survives the round trip through float.
#define BOOST_TEST_MODULE half
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/model/half.hpp"

#include <bit>
#include <cmath>
#include <random>
#include <vector>

using namespace actorlm::kernels::cpu;

namespace {

// Random floats of every kind: uniform bit patterns (all exponents, NaNs and infinities among
// them), plus values near the f16 range's edges and ties between two halves.
std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> out;
  for (std::size_t i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0: out.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng()))); break;
      case 1: out.push_back(std::ldexp(float(rng() % 100000) / 1000.0f, int(rng() % 40) - 30)); break;
      case 2: out.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(0x33000000u + rng() % 0x14800000u))); break;
      default: {  // a tie: a half's bits with exactly half an f16 unit above it
        const auto h = static_cast<std::uint16_t>(rng() % 0x7c00u);
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(half_to_float(h));
        out.push_back(std::bit_cast<float>(h >= 0x400u ? bits | 0x1000u : bits));
      }
    }
    if (rng() % 2) out.back() = -out.back();
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(f16c_and_scalar_conversions_are_bit_identical) {
  const HalfKernels* f16c = f16c_half_kernels();
  if (f16c == nullptr) {
    BOOST_TEST_MESSAGE("this CPU has no F16C: the scalar conversion alone runs");
    return;
  }
  const auto x = random_floats(1 << 20, 1);
  std::vector<std::uint16_t> a(x.size()), b(x.size());
  scalar_half_kernels().to_half(x.data(), a.data(), x.size());
  f16c->to_half(x.data(), b.data(), x.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (a[i] != b[i] && ++differ < 10)
      BOOST_TEST_MESSAGE(std::hex << std::bit_cast<std::uint32_t>(x[i]) << ": scalar " << a[i] << ", f16c " << b[i]);
  BOOST_TEST(differ == 0u);

  std::vector<std::uint16_t> all(1 << 16);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  std::vector<float> fa(all.size()), fb(all.size());
  scalar_half_kernels().to_float(all.data(), fa.data(), all.size());
  f16c->to_float(all.data(), fb.data(), all.size());
  differ = 0;
  for (std::size_t i = 0; i < all.size(); ++i) differ += std::bit_cast<std::uint32_t>(fa[i]) != std::bit_cast<std::uint32_t>(fb[i]);
  BOOST_TEST(differ == 0u);
}

BOOST_AUTO_TEST_CASE(every_half_survives_the_round_trip_through_float) {
  for (std::uint32_t h = 0; h < (1u << 16); ++h) {
    const auto back = float_to_half(half_to_float(static_cast<std::uint16_t>(h)));
    const bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    if (nan) BOOST_TEST(back == (h | 0x200u), "NaN " << h << " comes back quieted");
    else BOOST_TEST(back == h, "half " << h);
  }
}

BOOST_AUTO_TEST_CASE(a_float_rounds_to_the_nearest_half_ties_to_even) {
  for (float x : random_floats(1 << 16, 2)) {
    if (!std::isfinite(x) || std::abs(x) >= 65504.0f) continue;
    const std::uint16_t h = float_to_half(x);
    const double got = half_to_float(h);
    // Its neighbours one unit down and up (same sign) are no closer.
    for (int step : {-1, 1}) {
      const auto mag = static_cast<std::int32_t>(h & 0x7fffu) + step;
      if (mag < 0 || mag >= 0x7c00) continue;
      const double other = half_to_float(static_cast<std::uint16_t>((h & 0x8000u) | std::uint32_t(mag)));
      const double dg = std::abs(got - x), dn = std::abs(other - x);
      BOOST_TEST((dg < dn || (dg == dn && (h & 1u) == 0)), "x = " << x << " -> half " << h);
    }
  }
  BOOST_TEST(float_to_half(65520.0f) == 0x7c00u);   // halfway past the largest half: to infinity
  BOOST_TEST(float_to_half(65519.0f) == 0x7bffu);   // 65504
  BOOST_TEST(float_to_half(std::ldexp(1.0f, -25)) == 0u);     // half the smallest subnormal: to even, 0
  BOOST_TEST(float_to_half(std::ldexp(1.5f, -25)) == 1u);
  BOOST_TEST(float_to_half(-0.0f) == 0x8000u);
}

BOOST_AUTO_TEST_CASE(dot_and_axpy_over_halves_equal_them_over_the_widened_floats) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (std::int32_t n : {1, 7, 8, 64, 67}) {
    std::vector<float> a(n), wide(n), y(n, 0.5f), y_ref(n, 0.5f);
    std::vector<std::uint16_t> b(n);
    for (std::int32_t i = 0; i < n; ++i) {
      a[i] = nd(rng);
      b[i] = float_to_half(nd(rng));
      wide[i] = half_to_float(b[i]);
    }
    double exact = 0;
    for (std::int32_t i = 0; i < n; ++i) exact += double(a[i]) * wide[i];
    for (const HalfKernels* k : {&scalar_half_kernels(), f16c_half_kernels()}) {
      if (k == nullptr) continue;
      BOOST_TEST(std::abs(k->dot(a.data(), b.data(), n) - exact) < 1e-5 * n, k->name << " n " << n);
      std::vector<float> yk = y;
      k->axpy(0.25f, b.data(), yk.data(), n);
      for (std::int32_t i = 0; i < n; ++i) BOOST_TEST(yk[i] == 0.5f + 0.25f * wide[i], k->name << " n " << n);
    }
  }
}

BOOST_AUTO_TEST_CASE(block_scores_and_accumulation_equal_the_row_by_row_loops_and_the_float_loops_bit_for_bit) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  for (std::int32_t n : {8, 64, 67, 128})
    for (std::int32_t rows : {1, 5, 8, 13, 16}) {
      std::vector<float> q(n), w(rows), y0(n);
      std::vector<std::uint16_t> kv(std::size_t(rows) * n);
      for (auto& v : q) v = nd(rng);
      for (auto& v : w) v = nd(rng);
      for (auto& v : y0) v = nd(rng);
      for (auto& v : kv) v = float_to_half(nd(rng));
      const float scale = 1.0f / std::sqrt(128.0f), inv = 0.3f;  // not a power of two: a misplaced scale shows
      for (const HalfKernels* k : {&scalar_half_kernels(), f16c_half_kernels()}) {
        if (k == nullptr) continue;
        std::vector<float> scores(rows), y = y0, y_rows = y0;
        k->scores(q.data(), kv.data(), rows, n, scale, scores.data());
        k->accumulate(w.data(), inv, kv.data(), rows, n, y.data());
        for (std::int32_t r = 0; r < rows; ++r) {
          BOOST_TEST(scores[r] == scale * k->dot(q.data(), kv.data() + std::size_t(r) * n, n), k->name << " row " << r);
          k->axpy(w[r] * inv, kv.data() + std::size_t(r) * n, y_rows.data(), n);
        }
        BOOST_TEST(y == y_rows, boost::test_tools::per_element());
        // The float block loops on the widened rows (what attention runs when query heads share
        // a KV head): the same bits.
        std::vector<float> wide(kv.size()), scores_f(rows), y_f = y0;
        k->to_float(kv.data(), wide.data(), wide.size());
        k->scores_f32(q.data(), wide.data(), rows, n, scale, scores_f.data());
        k->accumulate_f32(w.data(), inv, wide.data(), rows, n, y_f.data());
        BOOST_TEST(scores_f == scores, boost::test_tools::per_element());
        BOOST_TEST(y_f == y, boost::test_tools::per_element());
      }
    }
}
