// CUDA block copy and swap against the cpu reference. Needs a GPU: without one the binary
// exits 77, which CTest reports as skipped (compiling it is still checked by CI).
#define BOOST_TEST_MODULE kv_block_ops_cuda
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/kv_block_ops.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kv_block_ops.hpp"
#include "tests/support/gpu_test_main.hpp"

#include <cstdio>
#include <random>
#include <vector>

using namespace actorlm::kernels;

namespace {
std::vector<std::byte> random_cache(const KvCacheLayout& l, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(l.total_bytes());
  for (auto& b : v) b = std::byte(rng() & 0xff);
  return v;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t n) { ACTORLM_CUDA_CHECK(cudaMalloc(&ptr, n)); }
  ~DeviceBuffer() { cudaFree(ptr); }
  std::byte* bytes() { return static_cast<std::byte*>(ptr); }
};
}  // namespace

BOOST_AUTO_TEST_CASE(copy_blocks_matches_the_cpu_reference_for_aligned_and_odd_block_sizes) {
  for (std::size_t block_bytes : {std::size_t(16 * 8 * 64 * 2), std::size_t(37)}) {
    const KvCacheLayout l{4, 64, block_bytes};
    auto host = random_cache(l, 1);
    std::vector<BlockPair> pairs{{3, 60}, {0, 61}, {17, 62}, {63, 5}};
    DeviceBuffer cache(l.total_bytes()), dpairs(pairs.size() * sizeof(BlockPair));
    ACTORLM_CUDA_CHECK(cudaMemcpy(cache.ptr, host.data(), host.size(), cudaMemcpyHostToDevice));
    ACTORLM_CUDA_CHECK(cudaMemcpy(dpairs.ptr, pairs.data(), pairs.size() * sizeof(BlockPair),
                                  cudaMemcpyHostToDevice));
    cuda::copy_blocks({cache.bytes(), l, static_cast<const BlockPair*>(dpairs.ptr),
                       std::uint32_t(pairs.size())}, nullptr);
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::byte> got(l.total_bytes());
    ACTORLM_CUDA_CHECK(cudaMemcpy(got.data(), cache.ptr, got.size(), cudaMemcpyDeviceToHost));
    cpu::copy_blocks(host.data(), l, pairs);
    BOOST_TEST((got == host), "block_bytes " << block_bytes);
  }
}

// Runs of pairs whose sources and destinations both follow on go over as one copy per plane.
BOOST_AUTO_TEST_CASE(swap_out_and_in_round_trips_through_pinned_host_memory) {
  const KvCacheLayout dl{2, 32, 4096}, hl{2, 8, 4096};
  auto init = random_cache(dl, 2);
  DeviceBuffer dev(dl.total_bytes());
  ACTORLM_CUDA_CHECK(cudaMemcpy(dev.ptr, init.data(), init.size(), cudaMemcpyHostToDevice));
  std::byte* pinned = nullptr;
  ACTORLM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned), hl.total_bytes()));
  const std::vector<BlockPair> out{{5, 0}, {6, 1}, {7, 2}, {9, 3}, {8, 4}, {31, 5}};
  const std::vector<BlockPair> in{{0, 20}, {1, 21}, {2, 22}, {3, 10}, {4, 11}, {5, 0}};
  cuda::swap_blocks(dev.bytes(), dl, pinned, hl, out.data(), out.size(), cudaMemcpyDeviceToHost, nullptr);
  cuda::swap_blocks(pinned, hl, dev.bytes(), dl, in.data(), in.size(), cudaMemcpyHostToDevice, nullptr);
  ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::byte> got(dl.total_bytes());
  ACTORLM_CUDA_CHECK(cudaMemcpy(got.data(), dev.ptr, got.size(), cudaMemcpyDeviceToHost));
  cudaFreeHost(pinned);
  auto want = init;
  cpu::copy_blocks(want.data(), dl, std::vector<BlockPair>{{5, 20}, {6, 21}, {7, 22}, {9, 10}, {8, 11}, {31, 0}});
  BOOST_TEST((got == want));
}
