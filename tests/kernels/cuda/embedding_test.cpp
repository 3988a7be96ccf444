// The embedding gather on a GPU: each output row is its id's table row, converted from the
// table's dtype to the activations' (exact when they are the same, rounded to nearest even
// otherwise); an id outside the vocabulary gives zeros and is counted. Needs a GPU: without one
// the binary exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_embedding
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "kernels/cuda/embedding.hpp"
#include "tests/support/device_acts.hpp"
#include "tests/support/gpu_test_main.hpp"
#include "tests/support/normal_floats.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace actorlm;
using kernels::cuda::ActDtype;
using testing::DeviceActs;
using testing::DeviceArray;
using testing::rounded;

BOOST_AUTO_TEST_CASE(rows_are_gathered_and_converted_and_bad_ids_give_counted_zeros) {
  const std::int64_t vocab = 1000, hidden = 576;
  const std::vector<std::int32_t> ids{5, 999, 0, 5, -1, 1000, 42};
  for (const auto tdt : {ActDtype::f32, ActDtype::f16, ActDtype::bf16})
    for (const auto odt : {ActDtype::f32, ActDtype::f16, ActDtype::bf16}) {
      const auto table = rounded(testing::normal_floats(vocab * hidden, 1), tdt);
      DeviceActs dt(table, tdt), out(std::vector<float>(ids.size() * hidden, 3.0f), odt);
      DeviceArray<std::int32_t> did(ids);
      DeviceArray<std::uint32_t> rejected(std::vector<std::uint32_t>{0});
      kernels::cuda::EmbeddingParams p;
      p.table = dt.ptr;
      p.ids = did.ptr;
      p.out = out.ptr;
      p.tokens = static_cast<std::int64_t>(ids.size());
      p.vocab = vocab;
      p.hidden = hidden;
      p.table_dtype = tdt;
      p.out_dtype = odt;
      p.rejected = rejected.ptr;
      kernels::cuda::embedding(p, nullptr);
      ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> want(ids.size() * hidden, 0.0f);
      for (std::size_t t = 0; t < ids.size(); ++t)
        if (ids[t] >= 0 && ids[t] < vocab)
          for (std::int64_t i = 0; i < hidden; ++i) want[t * hidden + i] = table[ids[t] * hidden + i];
      BOOST_TEST((out.read() == rounded(want, odt)), int(tdt) << " -> " << int(odt));
      BOOST_TEST(rejected.read(1)[0] == 2u);
    }
}

// A vocabulary-parallel rank's table holds rows [first, first + vocab): ids elsewhere give zeros,
// so the ranks' outputs summed are the whole table's gather.
BOOST_AUTO_TEST_CASE(a_slice_of_the_table_gathers_its_own_rows_and_zeros_for_the_others) {
  const std::int64_t vocab = 1000, hidden = 64, ranks = 3, rows = (vocab + ranks - 1) / ranks;
  const std::vector<std::int32_t> ids{5, 999, 0, 333, 334, 666, 667, 500};
  const auto table = testing::normal_floats(vocab * hidden, 2);
  std::vector<float> sum(ids.size() * hidden, 0.0f);
  for (std::int64_t r = 0; r < ranks; ++r) {
    const std::int64_t first = r * rows, mine = std::min(rows, vocab - first);
    DeviceActs dt(std::vector<float>(table.begin() + first * hidden, table.begin() + (first + mine) * hidden),
                  ActDtype::f32);
    DeviceActs out(std::vector<float>(ids.size() * hidden, 3.0f), ActDtype::f32);
    DeviceArray<std::int32_t> did(ids);
    kernels::cuda::EmbeddingParams p;
    p.table = dt.ptr;
    p.ids = did.ptr;
    p.out = out.ptr;
    p.tokens = static_cast<std::int64_t>(ids.size());
    p.vocab = mine;
    p.first = first;
    p.hidden = hidden;
    p.table_dtype = p.out_dtype = ActDtype::f32;
    kernels::cuda::embedding(p, nullptr);
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = out.read();
    for (std::size_t t = 0; t < ids.size(); ++t) {
      const bool own = ids[t] >= first && ids[t] < first + mine;
      for (std::int64_t i = 0; i < hidden; ++i) {
        const float want = own ? table[ids[t] * hidden + i] : 0.0f;
        BOOST_TEST(got[t * hidden + i] == want, "rank " << r << " token " << t);
        sum[t * hidden + i] += got[t * hidden + i];
      }
    }
  }
  for (std::size_t t = 0; t < ids.size(); ++t)
    for (std::int64_t i = 0; i < hidden; ++i) BOOST_TEST(sum[t * hidden + i] == table[ids[t] * hidden + i]);
}
