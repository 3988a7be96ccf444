// quant_dot.hpp's kernels on random matrices of every stored type: the AVX2 and AVX-512 paths
// against the scalar one (the same bits for integer types), the scalar one against float
// (dequantize the weights, multiply by the unquantized activations) within the error that 16-bit
// activations allow, the reproducibility contract (an output element's bits do not depend on how
// many activation rows come with it), and row_groups.hpp's layout.
#define BOOST_TEST_MODULE quant_dot
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/model/matmul.hpp"
#include "kernels/cpu/model/row_groups.hpp"
#include "model/format/dequantize.hpp"

#include <cmath>
#include <cstring>
#include <random>

using namespace actorlm;
using namespace actorlm::kernels::cpu;
using model::DType;

namespace actorlm::model {
std::ostream& operator<<(std::ostream& o, DType t) { return o << dtype_name(t); }
}  // namespace actorlm::model

namespace {

std::uint16_t f16_bits(float f) {
  // f32 -> f16 by truncation, for the normal values below 2 that these tests draw; tiny values
  // flush to zero.
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  const std::uint32_t sign = (b >> 16) & 0x8000u;
  const std::int32_t exp = static_cast<std::int32_t>((b >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return static_cast<std::uint16_t>(sign);  // flush tiny values to zero
  return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(exp) << 10) | ((b >> 13) & 0x3ffu));
}

void put_u16(std::vector<std::byte>& out, std::uint16_t v) {
  out.push_back(static_cast<std::byte>(v & 0xff));
  out.push_back(static_cast<std::byte>(v >> 8));
}

// A random [rows, cols] matrix stored as `t` (random scales, minimums and codes).
WeightMatrix random_matrix(DType t, std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> scale(0.001f, 0.05f), val(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255), i8(-127, 127);
  std::vector<std::byte> data;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (t == DType::f32 || t == DType::f16 || t == DType::bf16) {
      for (std::int64_t j = 0; j < cols; ++j) {
        const float v = val(rng);
        if (t == DType::f32) {
          const auto* p = reinterpret_cast<const std::byte*>(&v);
          data.insert(data.end(), p, p + 4);
        } else if (t == DType::f16) {
          put_u16(data, f16_bits(v));
        } else {
          std::uint32_t b;
          std::memcpy(&b, &v, sizeof b);
          put_u16(data, static_cast<std::uint16_t>(b >> 16));
        }
      }
      continue;
    }
    for (std::int64_t b = 0; b < cols / 32; ++b) {
      put_u16(data, f16_bits(scale(rng)));
      if (t == DType::q4_1) put_u16(data, f16_bits(-scale(rng) * 8));
      const int codes = t == DType::q8_0 ? 32 : 16;
      for (int j = 0; j < codes; ++j)
        data.push_back(static_cast<std::byte>(t == DType::q8_0 ? static_cast<std::uint8_t>(i8(rng)) : byte(rng)));
    }
  }
  return stored_matrix(t, data, rows, cols);
}

// The same, in the layout the kernels read (integer types grouped).
WeightMatrix kernel_matrix(DType t, std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  WeightMatrix w = random_matrix(t, rows, cols, rng);
  group_rows(w);
  return w;
}

std::vector<float> random_activations(std::int64_t m, std::int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) v = d(rng);
  return x;
}

// y[m, n] by `kernels`, one call over all rows.
std::vector<float> run(const DotKernels& kernels, const WeightMatrix& w, const std::vector<float>& x, std::int64_t m) {
  std::vector<Q16Block> xq(tiled_blocks(m, w.cols));
  if (is_integer_type(w.dtype)) quantize_rows(kernels, x.data(), w.cols, 0, m, xq.data());
  std::vector<float> y(static_cast<std::size_t>(m * w.rows));
  DotParams p;
  p.w = &w;
  p.row_begin = 0;
  p.row_end = w.rows;
  p.x = x.data();
  p.xq = xq.data();
  p.m = m;
  p.y = y.data();
  p.ldy = w.rows;
  kernels.for_type(w.dtype)(p);
  return y;
}

const DType kernel_types[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::f16, DType::bf16};
const DType integer_types[] = {DType::q8_0, DType::q4_0, DType::q4_1};
const DType half_types[] = {DType::f16, DType::bf16};
const std::int64_t widths[] = {32, 576, 1536};

}  // namespace

BOOST_AUTO_TEST_CASE(avx2_quantization_gives_the_same_blocks_as_the_scalar_one) {
  const DotKernels* avx2 = avx2_kernels();
  if (avx2 == nullptr) {
    BOOST_TEST_MESSAGE("no AVX2 on this CPU or build: nothing to compare");
    return;
  }
  std::mt19937 rng(1);
  auto x = random_activations(1, 4096, rng);
  x[5] = 0.0f;
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block: scale 0
  std::vector<Q16Block> a(128), b(128);
  scalar_kernels().quantize(x.data(), 4096, a.data(), 1);
  avx2->quantize(x.data(), 4096, b.data(), 1);
  for (std::size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST(a[i].d == b[i].d);
    BOOST_TEST(a[i].s == b[i].s);
    BOOST_TEST(std::memcmp(a[i].q, b[i].q, sizeof a[i].q) == 0, "block " << i);
  }
}

BOOST_AUTO_TEST_CASE(quantization_puts_each_row_s_blocks_in_its_tile_slot) {
  std::mt19937 rng(2);
  const std::int64_t m = 11, k = 96;
  const auto x = random_activations(m, k, rng);
  std::vector<Q16Block> tiled(tiled_blocks(m, k));
  BOOST_TEST(tiled.size() == 2u * 8u * 3u);
  quantize_rows(scalar_kernels(), x.data(), k, 0, m, tiled.data());
  for (std::int64_t i = 0; i < m; ++i) {
    std::vector<Q16Block> alone(3);
    scalar_kernels().quantize(x.data() + i * k, k, alone.data(), 1);
    for (std::int64_t b = 0; b < 3; ++b) {
      const Q16Block& t = tiled[static_cast<std::size_t>((i / 8 * 3 + b) * 8 + i % 8)];
      BOOST_TEST(t.d == alone[b].d);
      BOOST_TEST(std::memcmp(t.q, alone[b].q, sizeof t.q) == 0, "row " << i << " block " << b);
    }
  }
}

// 37 rows: two whole groups and a last one of 5 (zero padding).
BOOST_DATA_TEST_CASE(grouping_rows_keeps_every_block_and_every_value,
                     boost::unit_test::data::make(integer_types), type) {
  std::mt19937 rng(5);
  const std::int64_t n = 37, k = 96;
  const WeightMatrix rows = random_matrix(type, n, k, rng);
  WeightMatrix grouped = rows;
  group_rows(grouped);
  BOOST_TEST(grouped.grouped);
  BOOST_TEST(grouped.bytes() == 3 * 16 * rows.row_bytes());
  const std::size_t fb = file_block_bytes(type);
  std::vector<std::byte> block(fb);
  std::vector<float> a(static_cast<std::size_t>(k)), b(a.size());
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t j = 0; j < k / 32; ++j) {
      ungroup_block(grouped, r, j, block.data());
      BOOST_TEST(std::memcmp(block.data(), rows.row(r) + j * fb, fb) == 0, "row " << r << " block " << j);
    }
    rows.dequantize_row(r, a);
    grouped.dequantize_row(r, b);
    BOOST_TEST(a == b, boost::test_tools::per_element());
  }
  WeightMatrix out;  // slicing and joining take the row layout only
  BOOST_CHECK_THROW(append_rows(grouped, 0, 1, out), std::logic_error);
  BOOST_CHECK_THROW(column_slice(grouped, 0, 32), std::logic_error);
}

BOOST_AUTO_TEST_CASE(matmul_refuses_integer_weights_that_are_not_grouped) {
  std::mt19937 rng(6);
  const auto w = random_matrix(DType::q4_1, 16, 64, rng);
  const auto x = random_activations(1, 64, rng);
  std::vector<float> y(16);
  MatmulScratch scratch;
  ThreadPool pool(1);
  BOOST_CHECK_THROW(matmul({x.data(), 1, &w, y.data()}, pool, scratch), std::logic_error);
}

// Integer kernels: every path computes quant_dot.hpp's arithmetic exactly, so the bits agree.
// 37 weight rows (a short last group) and m from 1 to 19 (every tile shape and remainder).
BOOST_DATA_TEST_CASE(vector_integer_kernels_give_the_scalar_kernels_bits,
                     boost::unit_test::data::make(integer_types) * boost::unit_test::data::make(widths), type, k) {
  std::mt19937 rng(static_cast<unsigned>(k) + 1);
  const std::int64_t n = 37;
  const auto w = kernel_matrix(type, n, k, rng);
  for (const DotKernels* vec : {avx2_kernels(), avx512_kernels()}) {
    if (vec == nullptr) continue;
    for (std::int64_t m : {1, 2, 3, 4, 5, 8, 9, 19, 150}) {  // 150: more than one pass at k = 1536
      const auto x = random_activations(m, k, rng);
      const auto ys = run(scalar_kernels(), w, x, m), yv = run(*vec, w, x, m);
      BOOST_TEST(ys == yv, vec->name << " m=" << m << boost::test_tools::per_element());
    }
  }
}

// The AVX2 F16 / BF16 kernels add in another order than the scalar ones: float rounding, a few
// ulps of the sum of |terms|, bounded here by 1e-5 of it.
BOOST_DATA_TEST_CASE(avx2_half_kernels_agree_with_the_scalar_ones,
                     boost::unit_test::data::make(half_types) * boost::unit_test::data::make(widths), type, k) {
  const DotKernels* avx2 = avx2_kernels();
  if (avx2 == nullptr) return;
  std::mt19937 rng(static_cast<unsigned>(k));
  const std::int64_t n = 37, m = 7;  // odd counts: tile remainders
  const auto w = kernel_matrix(type, n, k, rng);
  const auto x = random_activations(m, k, rng);
  const auto ys = run(scalar_kernels(), w, x, m), yv = run(*avx2, w, x, m);
  std::vector<float> row(static_cast<std::size_t>(k));
  double worst = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    w.dequantize_row(r, row);
    for (std::int64_t i = 0; i < m; ++i) {
      double mag = 0;
      for (std::int64_t j = 0; j < k; ++j) mag += std::abs(double(row[j]) * x[i * k + j]);
      const double diff = std::abs(double(ys[i * n + r]) - yv[i * n + r]);
      worst = std::max(worst, diff / (mag + 1e-30));
    }
  }
  BOOST_TEST_MESSAGE(model::dtype_name(type) << " k=" << k << ": worst |avx2 - scalar| / sum|terms| = " << worst);
  BOOST_TEST(worst < 1e-5);
}

// Against float: each activation is off by at most half a quantization step, d_b / 2 =
// max_b|x| / 65534, so |error| <= sum_b (max_b|x| / 65534) * sum_{j in b} |w_j| (plus float rounding,
// 1e-5 of the sum of |terms|). Q4_1's minimum term uses the quantized sum too, so its |w| is
// |nibble * d + m| as dequantized. F16 / BF16 keep float activations: rounding only.
BOOST_DATA_TEST_CASE(scalar_kernels_agree_with_dequantized_float_within_the_activation_rounding,
                     boost::unit_test::data::make(kernel_types) * boost::unit_test::data::make(widths), type, k) {
  std::mt19937 rng(static_cast<unsigned>(k) + 7);
  const std::int64_t n = 29, m = 3;
  const auto w = kernel_matrix(type, n, k, rng);
  const auto x = random_activations(m, k, rng);
  const auto y = run(scalar_kernels(), w, x, m);
  std::vector<float> row(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < n; ++r) {
    w.dequantize_row(r, row);
    for (std::int64_t i = 0; i < m; ++i) {
      const float* xi = x.data() + i * k;
      double exact = 0, mag = 0, bound = 0;
      for (std::int64_t b = 0; b < k / 32; ++b) {
        double amax = 0, wsum = 0;
        for (std::int64_t j = b * 32; j < b * 32 + 32; ++j) {
          exact += double(row[j]) * xi[j];
          mag += std::abs(double(row[j]) * xi[j]);
          amax = std::max(amax, double(std::abs(xi[j])));
          wsum += std::abs(double(row[j]));
        }
        if (is_integer_type(type)) bound += amax / 65534.0 * wsum;
      }
      bound += 1e-5 * mag;
      BOOST_TEST(std::abs(y[i * n + r] - exact) <= bound, model::dtype_name(type) << " row " << r << " x " << i);
    }
  }
}

BOOST_DATA_TEST_CASE(an_output_is_the_same_bits_alone_or_among_many_rows,
                     boost::unit_test::data::make(kernel_types), type) {
  std::mt19937 rng(3);
  const std::int64_t k = 576, n = 40, m = 19;
  const auto w = kernel_matrix(type, n, k, rng);
  const auto x = random_activations(m, k, rng);
  const auto all = run(best_kernels(), w, x, m);
  for (std::int64_t i = 0; i < m; ++i) {
    const std::vector<float> xi(x.begin() + i * k, x.begin() + (i + 1) * k);
    const auto alone = run(best_kernels(), w, xi, 1);
    for (std::int64_t r = 0; r < n; ++r) BOOST_TEST(alone[r] == all[i * n + r], "row " << r << " x " << i);
  }
}

BOOST_AUTO_TEST_CASE(matmul_splits_rows_over_the_pool_without_changing_a_bit) {
  std::mt19937 rng(9);
  for (DType t : {DType::q4_1, DType::q8_0, DType::f16, DType::f32}) {
    const std::int64_t k = 576, n = 300, m = 5;
    const auto w = kernel_matrix(t, n, k, rng);
    const auto x = random_activations(m, k, rng);
    std::vector<float> one(static_cast<std::size_t>(m * n)), three(one.size());
    MatmulScratch scratch;
    ThreadPool p1(1), p3(3);
    matmul({x.data(), m, &w, one.data()}, p1, scratch);
    matmul({x.data(), m, &w, three.data()}, p3, scratch);
    if (t == DType::f32) {  // BLAS: per-panel calls may block differently; rounding only
      for (std::size_t i = 0; i < one.size(); ++i) BOOST_TEST(std::abs(one[i] - three[i]) < 1e-4f);
    } else {
      BOOST_TEST(one == three, boost::test_tools::per_element());
    }
  }
}

// Many rows of F16 / BF16 weights go through dequantized weights and sgemm instead of the
// kernels: the paths differ by float rounding only. 70 rows: the matrix dequantized whole; 7,400
// rows (over 2^22 weights): panels per thread.
BOOST_DATA_TEST_CASE(the_sgemm_path_agrees_with_the_half_kernels,
                     boost::unit_test::data::make(half_types) * boost::unit_test::data::make({70, 7400}), type, n) {
  std::mt19937 rng(11);
  const std::int64_t k = 576, m = 9;
  const auto w = kernel_matrix(type, n, k, rng);
  const auto x = random_activations(m, k, rng);
  std::vector<float> kernels(static_cast<std::size_t>(m * n)), panels(kernels.size());
  MatmulScratch scratch;
  ThreadPool pool(2);
  matmul({x.data(), m, &w, kernels.data(), m + 1}, pool, scratch);
  matmul({x.data(), m, &w, panels.data(), 1}, pool, scratch);
  std::vector<float> row(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < n; ++r) {
    w.dequantize_row(r, row);
    for (std::int64_t i = 0; i < m; ++i) {
      double mag = 0;
      for (std::int64_t j = 0; j < k; ++j) mag += std::abs(double(row[j]) * x[i * k + j]);
      BOOST_TEST(std::abs(double(kernels[i * n + r]) - panels[i * n + r]) <= 1e-5 * mag, "row " << r << " x " << i);
    }
  }
}
