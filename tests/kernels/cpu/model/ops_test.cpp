// The forward's element-wise ops against straightforward double-precision formulas.
#define BOOST_TEST_MODULE model_ops
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/model/ops.hpp"

#include <cmath>
#include <random>
#include <vector>

using namespace actorlm::kernels::cpu;

namespace {
std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}
}  // namespace

BOOST_AUTO_TEST_CASE(matmul_nt_multiplies_by_the_transposed_weight) {
  const auto x = random_vector(3 * 5, 1), w = random_vector(4 * 5, 2);
  std::vector<float> y(3 * 4);
  matmul_nt(x.data(), 3, 5, w.data(), 4, y.data());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < 5; ++k) acc += double(x[i * 5 + k]) * w[j * 5 + k];
      BOOST_TEST(y[i * 4 + j] == acc, boost::test_tools::tolerance(1e-5));
    }
}

BOOST_AUTO_TEST_CASE(rms_norm_and_layer_norm_match_their_formulas) {
  const auto x = random_vector(2 * 64, 3), w = random_vector(64, 4), b = random_vector(64, 5);
  std::vector<float> r(x.size()), l(x.size());
  rms_norm(x.data(), 2, 64, w.data(), 1e-5f, r.data());
  layer_norm(x.data(), 2, 64, w.data(), b.data(), 1e-5f, l.data());
  for (int row = 0; row < 2; ++row) {
    double ss = 0, mean = 0, var = 0;
    for (int i = 0; i < 64; ++i) ss += double(x[row * 64 + i]) * x[row * 64 + i], mean += x[row * 64 + i];
    mean /= 64;
    for (int i = 0; i < 64; ++i) var += (x[row * 64 + i] - mean) * (x[row * 64 + i] - mean);
    for (int i = 0; i < 64; ++i) {
      const double xi = x[row * 64 + i];
      BOOST_TEST(r[row * 64 + i] == xi / std::sqrt(ss / 64 + 1e-5) * w[i], boost::test_tools::tolerance(1e-4));
      BOOST_TEST(l[row * 64 + i] == (xi - mean) / std::sqrt(var / 64 + 1e-5) * w[i] + b[i],
                 boost::test_tools::tolerance(1e-4));
    }
  }
}

// Rotating interleaved pairs of a permuted head equals rotating halves of the original: the
// reason GGUF Llama checkpoints (Q/K rows permuted by the converter) use the interleaved style.
BOOST_AUTO_TEST_CASE(interleaved_rope_on_permuted_dims_equals_half_rope) {
  const int hd = 16, heads = 3, rows = 5;
  const auto x = random_vector(rows * heads * hd, 6);
  std::vector<float> halves = x, inter(x.size());
  for (int r = 0; r < rows * heads; ++r)
    for (int i = 0; i < hd / 2; ++i) {
      inter[r * hd + 2 * i] = x[r * hd + i];
      inter[r * hd + 2 * i + 1] = x[r * hd + i + hd / 2];
    }
  const std::vector<std::int32_t> pos{0, 1, 7, 100, 2047};
  apply_rope(halves.data(), rows, heads * hd, heads, pos, {hd, 10000.0f, 1.0f, RopeStyle::halves});
  apply_rope(inter.data(), rows, heads * hd, heads, pos, {hd, 10000.0f, 1.0f, RopeStyle::interleaved});
  for (int r = 0; r < rows * heads; ++r)
    for (int i = 0; i < hd / 2; ++i) {
      BOOST_TEST(inter[r * hd + 2 * i] == halves[r * hd + i], boost::test_tools::tolerance(1e-6f));
      BOOST_TEST(inter[r * hd + 2 * i + 1] == halves[r * hd + i + hd / 2], boost::test_tools::tolerance(1e-6f));
    }
}

BOOST_AUTO_TEST_CASE(rope_rotates_by_position_times_frequency) {
  std::vector<float> x{1.0f, 0.0f, 0.0f, 1.0f};  // one head of 4: pairs (x0, x2) and (x1, x3)
  const std::vector<std::int32_t> pos{3};
  apply_rope(x.data(), 1, 4, 1, pos, {4, 100.0f, 2.0f, RopeStyle::halves});
  const double a0 = 3.0 / 2.0, a1 = 3.0 / 2.0 / 10.0;  // theta^(-2i/4) = 1, 1/10; factor 2
  BOOST_TEST(x[0] == std::cos(a0), boost::test_tools::tolerance(1e-6));
  BOOST_TEST(x[2] == std::sin(a0), boost::test_tools::tolerance(1e-6));
  BOOST_TEST(x[1] == -std::sin(a1), boost::test_tools::tolerance(1e-6));
  BOOST_TEST(x[3] == std::cos(a1), boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(silu_mul_over_whole_vectors_and_a_tail_matches_the_formula_in_double) {
  // 37 columns: four 8-lane groups of the vector path and a scalar tail, over two rows.
  constexpr std::int64_t f = 37;
  std::vector<float> gu(2 * 2 * f);
  for (std::size_t i = 0; i < gu.size(); ++i) gu[i] = float(std::sin(0.7 * double(i)) * 12.0);
  std::vector<float> out(2 * f);
  silu_mul(gu.data(), 2, f, out.data());
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t i = 0; i < f; ++i) {
      const double g = gu[r * 2 * f + i], u = gu[r * 2 * f + f + i];
      BOOST_TEST(out[r * f + i] == g / (1 + std::exp(-g)) * u, boost::test_tools::tolerance(1e-6));
    }
}

BOOST_AUTO_TEST_CASE(activations_match_silu_and_erf_gelu) {
  std::vector<float> gu{-2.0f, 0.5f, 3.0f, -1.0f};  // one row: gate (-2, 0.5), up (3, -1)
  std::vector<float> out(2);
  silu_mul(gu.data(), 1, 2, out.data());
  BOOST_TEST(out[0] == -2.0 / (1 + std::exp(2.0)) * 3.0, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(out[1] == 0.5 / (1 + std::exp(-0.5)) * -1.0, boost::test_tools::tolerance(1e-6));
  std::vector<float> g{-1.0f, 0.0f, 2.0f};
  gelu(g.data(), 3);
  for (int i = 0; i < 3; ++i) {
    const double v = std::vector<double>{-1, 0, 2}[i];
    BOOST_TEST(g[i] == 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), boost::test_tools::tolerance(1e-6));
  }
}
