// CudaKvCache's swaps, on the cache's own stream, against the cpu reference (kernels/cpu/kv_block_ops):
// blocks swapped out and back in to other blocks while the freed ones are overwritten, a
// copy-on-write of a block just swapped in, and the shard stream's waits layer by layer. Needs a
// GPU (exits 77 without one); built again over tools/cuda_emu, which runs a copy as late as
// CUDA's ordering allows, so that a wait left out reads the old bytes there.
#define BOOST_TEST_MODULE cuda_kv_cache
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/kv_block_ops.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/model/cuda_kv_cache.hpp"
#include "tests/support/gpu_test_main.hpp"

#include <cstring>
#include <random>
#include <vector>

using namespace actorlm::kernels;

namespace {

constexpr std::uint32_t layers = 3, device_blocks = 16, host_blocks = 8, block_size = 4;
constexpr std::int32_t kv_heads = 2, head_dim = 8;

struct Fixture {
  Fixture() {
    ACTORLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::mt19937 rng(7);
    for (auto& b : init) b = std::byte(rng() & 0xff);
    ACTORLM_CUDA_CHECK(cudaMemcpy(cache.k(0), init.data(), init.size(), cudaMemcpyHostToDevice));
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());  // a pageable copy's DMA may outlive the call
  }
  ~Fixture() { cudaStreamDestroy(stream); }
  // The device cache's bytes (planes follow on from layer 0's K), once `stream` has finished.
  std::vector<std::byte> read() {
    ACTORLM_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<std::byte> out(layout.total_bytes());
    ACTORLM_CUDA_CHECK(cudaMemcpy(out.data(), cache.k(0), out.size(), cudaMemcpyDeviceToHost));
    return out;
  }
  // What a forward does to blocks it was given: overwrites them, on `stream`.
  void scribble(std::initializer_list<std::uint32_t> blocks) {
    for (std::uint32_t p = 0; p < 2 * layers; ++p)
      for (std::uint32_t b : blocks)
        ACTORLM_CUDA_CHECK(cudaMemsetAsync(static_cast<std::byte*>(cache.k(0)) + layout.offset(p, b), 0xab,
                                           layout.block_bytes, stream));
  }
  static void scribble(std::vector<std::byte>& bytes, const KvCacheLayout& l, std::initializer_list<std::uint32_t> blocks) {
    for (std::uint32_t p = 0; p < 2 * l.num_layers; ++p)
      for (std::uint32_t b : blocks) std::memset(bytes.data() + l.offset(p, b), 0xab, l.block_bytes);
  }

  cuda::CudaKvCache cache{layers, kv_heads, head_dim, block_size, device_blocks, host_blocks, cuda::ActDtype::f16};
  KvCacheLayout layout{layers, device_blocks, std::size_t(kv_heads) * head_dim * block_size * 2};
  std::vector<std::byte> init = std::vector<std::byte>(layout.total_bytes());
  cudaStream_t stream = nullptr;
};

}  // namespace

BOOST_AUTO_TEST_CASE(blocks_swapped_out_and_in_land_where_the_cpu_reference_puts_them) {
  Fixture f;
  // Step 1: four blocks out (three in a run), then the forward reuses them.
  const std::vector<BlockPair> out{{5, 0}, {6, 1}, {7, 2}, {12, 3}};
  f.cache.swap(out, {}, f.stream);
  BOOST_TEST(f.cache.swaps_pending());
  f.cache.wait_swaps(f.stream);
  BOOST_TEST(!f.cache.swaps_pending());
  f.scribble({5, 6, 7, 12});
  // Step 2: back in to other blocks, and a copy-on-write of one just swapped in (copy() waits
  // for the swaps itself).
  const std::vector<BlockPair> in{{0, 9}, {1, 10}, {2, 11}, {3, 4}};
  f.cache.swap({}, in, f.stream);
  f.cache.copy(std::vector<BlockPair>{{9, 13}}, f.stream);
  BOOST_TEST(!f.cache.swaps_pending());

  auto want = f.init;
  cpu::copy_blocks(want.data(), f.layout, std::vector<BlockPair>{{5, 9}, {6, 10}, {7, 11}, {12, 4}});
  Fixture::scribble(want, f.layout, {5, 6, 7, 12});
  cpu::copy_blocks(want.data(), f.layout, std::vector<BlockPair>{{9, 13}});
  BOOST_TEST((f.read() == want));
}

BOOST_AUTO_TEST_CASE(a_stream_waits_for_each_layer_of_the_swaps_on_its_own) {
  Fixture f;
  f.cache.swap(std::vector<BlockPair>{{1, 0}}, {}, f.stream);
  f.cache.wait_swaps(f.stream);
  f.scribble({1, 3});
  f.cache.swap({}, std::vector<BlockPair>{{0, 3}}, f.stream);
  f.cache.wait_layer(0, f.stream);
  auto want = f.init;
  Fixture::scribble(want, f.layout, {1, 3});
  const auto layer0 = f.read();
  for (std::uint32_t p = 0; p < 2; ++p)  // layer 0's K and V: block 3 holds what block 1 held
    BOOST_TEST(std::memcmp(layer0.data() + f.layout.offset(p, 3), f.init.data() + f.layout.offset(p, 1),
                           f.layout.block_bytes) == 0);
#ifdef ACTORLM_CUDA_EMU
  // The emulation runs the later layers' copies only when something orders them: nothing has.
  // (On a GPU they may or may not have run by now.)
  for (std::uint32_t p = 2; p < 2 * layers; ++p)
    BOOST_TEST(std::memcmp(layer0.data() + f.layout.offset(p, 3), want.data() + f.layout.offset(p, 3),
                           f.layout.block_bytes) == 0);
#endif
  BOOST_TEST(f.cache.swaps_pending());
  f.cache.wait_swaps(f.stream);
  const auto all = f.read();
  for (std::uint32_t p = 0; p < 2 * layers; ++p)
    BOOST_TEST(std::memcmp(all.data() + f.layout.offset(p, 3), f.init.data() + f.layout.offset(p, 1),
                           f.layout.block_bytes) == 0);
}

// The block manager may hand a block that one swap moves out to a sequence the same step moves
// in: each plane goes out before it comes in.
BOOST_AUTO_TEST_CASE(a_block_swapped_out_can_be_the_destination_of_a_swap_in_of_the_same_step) {
  Fixture f;
  f.cache.swap(std::vector<BlockPair>{{2, 1}}, {}, f.stream);  // host block 1: device block 2's bytes
  f.cache.wait_swaps(f.stream);
  f.cache.apply(std::vector<BlockPair>{{5, 0}}, std::vector<BlockPair>{{1, 5}}, std::vector<BlockPair>{{5, 6}},
                f.stream);
  f.cache.swap({}, std::vector<BlockPair>{{0, 7}}, f.stream);  // and block 5's old bytes back, elsewhere
  f.cache.wait_swaps(f.stream);
  auto want = f.init;
  cpu::copy_blocks(want.data(), f.layout, std::vector<BlockPair>{{5, 7}});
  cpu::copy_blocks(want.data(), f.layout, std::vector<BlockPair>{{2, 5}});
  cpu::copy_blocks(want.data(), f.layout, std::vector<BlockPair>{{5, 6}});
  BOOST_TEST((f.read() == want));
}

BOOST_AUTO_TEST_CASE(a_step_naming_a_block_outside_the_cache_is_refused_before_anything_is_enqueued) {
  Fixture f;
  const std::vector<BlockPair> fine{{1, 0}};
  BOOST_CHECK_THROW(f.cache.apply(std::vector<BlockPair>{{device_blocks, 0}}, {}, {}, f.stream), std::out_of_range);
  BOOST_CHECK_THROW(f.cache.apply({}, std::vector<BlockPair>{{host_blocks, 0}}, {}, f.stream), std::out_of_range);
  BOOST_CHECK_THROW(f.cache.apply(fine, {}, std::vector<BlockPair>{{2, device_blocks}}, f.stream), std::out_of_range);
  BOOST_TEST(!f.cache.swaps_pending());  // the swap-out before the bad copy was not enqueued
  BOOST_TEST((f.read() == f.init));
}
