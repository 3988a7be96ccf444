// tools/cuda_emu, the host emulation the cuda kernels' tests run on in CI: that it runs CUDA's
// semantics (barriers, shuffles, ballots, launch limits, cuBLAS's column-major GEMM, NCCL's
// all-reduce), and that it catches what a GPU would punish: a missing barrier, divergent
// barriers, a shuffle after lanes exited or from a lane the warp lacks, a shuffle beside a
// ballot, shared memory over the limit, a copy past an allocation.
#define BOOST_TEST_MODULE cuda_emu
#include <boost/test/unit_test.hpp>

#include "tests/tools/cuda_emu/emulator_kernels.hpp"
#include "tools/cuda_emu/host.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace {

template <class T>
struct Device {
  explicit Device(std::size_t n) : n(n) { BOOST_REQUIRE(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T)) == cudaSuccess); }
  explicit Device(const std::vector<T>& host) : Device(host.size()) {
    BOOST_REQUIRE(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~Device() { cudaFree(ptr); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    BOOST_REQUIRE(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return out;
  }
  T* ptr = nullptr;
  std::size_t n;
};

void expect_error(void (*launch)(int*), const std::string& words) {
  Device<int> out(64);
  try {
    launch(out.ptr);
    BOOST_FAIL("the launch was not refused");
  } catch (const std::runtime_error& e) {
    BOOST_TEST_MESSAGE(e.what());
    BOOST_TEST(std::string(e.what()).find(words) != std::string::npos, e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_block_reduction_with_its_barriers_sums_every_thread) {
  for (const int threads : {32, 64, 256, 1024}) {
    const int blocks = 5;
    std::vector<float> in(std::size_t(blocks) * threads);
    std::iota(in.begin(), in.end(), 1.0f);
    Device<float> din(in), dout(blocks);
    for (int run = 0; run < 3; ++run) {  // another thread order each launch
      cuda_emu_test::block_sum(din.ptr, dout.ptr, blocks, threads);
      const auto got = dout.host();
      for (int b = 0; b < blocks; ++b) {
        const double first = double(b) * threads + 1, last = first + threads - 1;
        BOOST_TEST(got[b] == float((first + last) * threads / 2));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_kernel_missing_a_barrier_reads_what_its_neighbour_had_not_written) {
  const int threads = 64;
  Device<float> out(threads);
  std::vector<float> want(threads);
  for (int i = 0; i < threads; ++i) want[i] = float(i == 0 ? 0 : i - 1);
  cuda_emu_test::neighbours(out.ptr, threads, true);
  BOOST_TEST(out.host() == want, boost::test_tools::per_element());
  // Without the barrier, a thread that runs before the one below it reads the unwritten slot
  // (0xff bytes: a NaN). Threads run in ascending order would all read written slots; in the
  // emulator's random order some thread runs first with probability 1 - 1/64!.
  cuda_emu_test::neighbours(out.ptr, threads, false);
  const auto got = out.host();
  const auto nan = std::count_if(got.begin(), got.end(), [](float x) { return std::isnan(x); });
  BOOST_TEST_MESSAGE(nan << " of " << threads << " threads read an unwritten slot");
  BOOST_TEST(nan > 0);
}

// __syncwarp orders a warp's shared-memory writes before its reads; without it some lane reads
// first (the lanes run in a random order).
BOOST_AUTO_TEST_CASE(a_warp_reads_what_its_lanes_wrote_before_a_syncwarp) {
  const int threads = 64;
  Device<float> out(threads);
  std::vector<float> want(threads);
  for (int i = 0; i < threads; ++i) want[i] = float(i / 32 * 32 + (i + 1) % 32);
  cuda_emu_test::warp_neighbours(out.ptr, threads, true);
  BOOST_TEST(out.host() == want, boost::test_tools::per_element());
  cuda_emu_test::warp_neighbours(out.ptr, threads, false);
  const auto got = out.host();
  BOOST_TEST(std::count_if(got.begin(), got.end(), [](float x) { return std::isnan(x); }) > 0);
}

BOOST_AUTO_TEST_CASE(shuffles_and_ballots_follow_cuda_semantics) {
  const int threads = 64;
  Device<int> out(4 * threads);
  cuda_emu_test::warp_ops(out.ptr, threads);
  const auto got = out.host();
  for (int t = 0; t < threads; ++t) {
    const int lane = t % 32;
    BOOST_TEST(got[4 * t] == 50);                             // lane 5's lane * 10
    BOOST_TEST(got[4 * t + 1] == (lane ^ 1));                 // pairs swapped
    BOOST_TEST(got[4 * t + 2] == (lane < 28 ? lane + 4 : lane));  // past the warp: its own value
    BOOST_TEST(static_cast<unsigned>(got[4 * t + 3]) == 0x49249249u);  // lanes 0, 3, 6, ... 30
  }
}

BOOST_AUTO_TEST_CASE(narrow_shuffles_read_their_own_group_or_keep_their_value) {
  Device<int> out(64);
  cuda_emu_test::narrow_shuffles(out.ptr);
  const auto got = out.host();
  for (int lane = 0; lane < 32; ++lane) {
    const int end = (lane & ~7) + 8;  // past the lane's group of 8
    const int x = lane ^ 12, d = lane + 3;
    BOOST_TEST(got[2 * lane] == (x < end ? x : lane), "lane " << lane);
    BOOST_TEST(got[2 * lane + 1] == (d < end ? d : lane), "lane " << lane);
  }
}

BOOST_AUTO_TEST_CASE(a_shuffle_from_a_lane_the_warp_lacks_is_refused) {
  expect_error(cuda_emu_test::missing_lane, "does not have");
}

BOOST_AUTO_TEST_CASE(lanes_at_a_shuffle_and_a_ballot_at_once_are_refused) {
  expect_error(cuda_emu_test::mixed_collectives, "different collectives");
}

BOOST_AUTO_TEST_CASE(divergent_barriers_are_reported_as_a_deadlock) {
  expect_error(cuda_emu_test::divergent, "deadlock");
}

BOOST_AUTO_TEST_CASE(a_full_mask_shuffle_after_some_lanes_exited_is_refused) {
  expect_error(cuda_emu_test::exited_lanes, "exited");
}

BOOST_AUTO_TEST_CASE(static_shared_memory_over_48_kib_is_refused) {
  Device<float> out(32);
  BOOST_CHECK_EXCEPTION(cuda_emu_test::big_static_shared(out.ptr), std::runtime_error, [](const std::runtime_error& e) {
    return std::string(e.what()).find("48 KiB of static shared memory") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(launch_shapes_a_gpu_refuses_set_the_launch_error_and_run_nothing) {
  Device<float> out(2048);
  BOOST_TEST(cudaMemset(out.ptr, 0, 2048 * sizeof(float)) == cudaSuccess);
  BOOST_TEST(cuda_emu_test::fill(out.ptr, 1, 1025, 0, 1.0f) == cudaErrorInvalidConfiguration);
  BOOST_TEST(cuda_emu_test::fill(out.ptr, 0, 32, 0, 1.0f) == cudaErrorInvalidConfiguration);
  BOOST_TEST(cuda_emu_test::fill(out.ptr, 1, 32, 64 * 1024, 1.0f) == cudaErrorInvalidConfiguration);
  BOOST_TEST(out.host() == std::vector<float>(2048, 0.0f), boost::test_tools::per_element());
  // 64 KiB of dynamic shared memory once the kernel is allowed it, as on a GPU.
  BOOST_TEST(cuda_emu_test::allow_dynamic_shared(64 * 1024) == cudaSuccess);
  BOOST_TEST(cuda_emu_test::fill(out.ptr, 2, 1024, 64 * 1024, 1.0f) == cudaSuccess);
  BOOST_TEST(out.host() == std::vector<float>(2048, 1.0f), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(copies_past_a_device_allocation_fail) {
  Device<float> d(16);
  std::vector<float> h(17, 1.0f);
  BOOST_TEST(cudaMemcpy(d.ptr, h.data(), 16 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  BOOST_TEST(cudaMemcpy(d.ptr, h.data(), 17 * sizeof(float), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  BOOST_TEST(cudaGetLastError() == cudaErrorInvalidValue);
  BOOST_TEST(cudaMemcpy(h.data(), d.ptr + 1, 16 * sizeof(float), cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  BOOST_TEST(cudaMemset(d.ptr + 8, 0, 9 * sizeof(float)) == cudaErrorInvalidValue);
  BOOST_TEST(cudaMemcpy(h.data(), h.data() + 1, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);  // not device memory
}

BOOST_AUTO_TEST_CASE(gemm_ex_computes_the_column_major_product_for_every_transpose) {
  cublasHandle_t h = nullptr;
  BOOST_REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  const int pad = 2;
  // The second shape's op(A) takes two chunks of rows (the emulation widens 65,536 floats at once).
  for (const auto& [m, n, k] : {std::tuple{5, 3, 7}, std::tuple{300, 9, 300}})
  for (const auto ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (const auto tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      // op(A) is m × k, op(B) k × n; stored column-major with leading dimensions padded.
      const int lda = (ta == CUBLAS_OP_N ? m : k) + pad, ldb = (tb == CUBLAS_OP_N ? k : n) + pad, ldc = m + pad;
      std::vector<float> a(std::size_t(lda) * (ta == CUBLAS_OP_N ? k : m)), b(std::size_t(ldb) * (tb == CUBLAS_OP_N ? n : k));
      for (auto& x : a) x = u(rng);
      for (auto& x : b) x = u(rng);
      std::vector<float> c(std::size_t(ldc) * n, 0.5f);
      auto opa = [&](int i, int l) { return ta == CUBLAS_OP_N ? a[i + std::size_t(l) * lda] : a[l + std::size_t(i) * lda]; };
      auto opb = [&](int l, int j) { return tb == CUBLAS_OP_N ? b[l + std::size_t(j) * ldb] : b[j + std::size_t(l) * ldb]; };
      Device<float> da(a), db(b), dc(c);
      const float alpha = 2.0f, beta = 0.25f;
      BOOST_REQUIRE(cublasGemmEx(h, ta, tb, m, n, k, &alpha, da.ptr, CUDA_R_32F, lda, db.ptr, CUDA_R_32F, ldb, &beta,
                                 dc.ptr, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
      const auto got = dc.host();
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double want = 0, size = 0;
          for (int l = 0; l < k; ++l) want += double(opa(i, l)) * opb(l, j), size += std::abs(double(opa(i, l)) * opb(l, j));
          want = alpha * want + beta * 0.5;
          // f32 sums: within 1e-6 of the terms' magnitudes (a relative bound fails near cancellation)
          BOOST_TEST(std::abs(got[i + std::size_t(j) * ldc] - want) <= 1e-6 * (1 + alpha * size),
                     m << "x" << n << "x" << k << " (" << i << ", " << j << ")");
        }
      for (int j = 0; j < n; ++j)  // the padding rows of C untouched
        for (int i = m; i < ldc; ++i) BOOST_TEST(got[i + std::size_t(j) * ldc] == 0.5f);
      // A leading dimension shorter than the matrix is refused, as cuBLAS refuses it.
      BOOST_TEST(cublasGemmEx(h, ta, tb, m, n, k, &alpha, da.ptr, CUDA_R_32F, (ta == CUBLAS_OP_N ? m : k) - 1, db.ptr,
                              CUDA_R_32F, ldb, &beta, dc.ptr, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE);
    }
  // k = 0: C = beta C, nothing read from A or B.
  {
    Device<float> da(std::vector<float>(3, 1.0f)), db(std::vector<float>(1, 1.0f)), dc(std::vector<float>(6, 0.5f));
    const float alpha = 2.0f, beta = 0.25f;
    BOOST_REQUIRE(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 3, 2, 0, &alpha, da.ptr, CUDA_R_32F, 3, db.ptr, CUDA_R_32F,
                               1, &beta, dc.ptr, CUDA_R_32F, 3, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    BOOST_TEST(dc.host() == std::vector<float>(6, 0.125f), boost::test_tools::per_element());
  }
  // beta = 0: C is not read (NaN there stays out of the result); bf16 inputs, f32 output.
  {
    const int mm = 3, nn = 2, kk = 4;
    std::vector<__nv_bfloat16> a(mm * kk), b(kk * nn);
    for (int i = 0; i < mm * kk; ++i) a[i] = __float2bfloat16_rn(float(i % 5) - 2);
    for (int i = 0; i < kk * nn; ++i) b[i] = __float2bfloat16_rn(float(i % 3) + 0.5f);
    Device<__nv_bfloat16> da(a), db(b);
    Device<float> dc(std::vector<float>(mm * nn, std::nanf("")));
    const float alpha = 1.0f, beta = 0.0f;
    BOOST_REQUIRE(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, mm, nn, kk, &alpha, da.ptr, CUDA_R_16BF, mm, db.ptr,
                               CUDA_R_16BF, kk, &beta, dc.ptr, CUDA_R_32F, mm, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    const auto got = dc.host();
    for (int i = 0; i < mm; ++i)
      for (int j = 0; j < nn; ++j) {
        float want = 0;
        for (int l = 0; l < kk; ++l) want += __bfloat162float(a[i + l * mm]) * __bfloat162float(b[l + j * kk]);
        BOOST_TEST(got[i + j * mm] == want);  // small integers and halves: exact
      }
  }
  cublasDestroy(h);
}

BOOST_AUTO_TEST_CASE(all_reduce_sums_over_ranks_on_their_own_threads) {
  const int world = 3;
  const std::size_t n = 1000;
  ncclUniqueId id;
  BOOST_REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclComm_t> comms(world);
  BOOST_REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < world; ++r) BOOST_REQUIRE(ncclCommInitRank(&comms[r], world, id, r) == ncclSuccess);
  BOOST_REQUIRE(ncclGroupEnd() == ncclSuccess);
  std::vector<std::vector<float>> got(world);
  std::vector<std::vector<int>> results(world);  // every call's ncclResult_t (and cuda errors)
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {  // no Boost.Test assertions here: checked after the join
      std::vector<__nv_bfloat16> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = __float2bfloat16_rn(float(i % 4) * (r + 1));
      __nv_bfloat16* d = nullptr;
      results[r].push_back(cudaMalloc(reinterpret_cast<void**>(&d), n * sizeof v[0]));
      results[r].push_back(cudaMemcpy(d, v.data(), n * sizeof v[0], cudaMemcpyHostToDevice));
      for (int round = 0; round < 4; ++round)  // in place, rounds back to back
        results[r].push_back(ncclAllReduce(d, d, n, ncclBfloat16, ncclSum, comms[r], nullptr));
      results[r].push_back(cudaMemcpy(v.data(), d, n * sizeof v[0], cudaMemcpyDeviceToHost));
      results[r].push_back(cudaFree(d));
      for (const auto x : v) got[r].push_back(__bfloat162float(x));
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < world; ++r) {
    BOOST_TEST(results[r] == std::vector<int>(8, 0), boost::test_tools::per_element());  // cudaSuccess, ncclSuccess
    for (std::size_t i = 0; i < n; ++i) {
      // (1 + 2 + 3) (i % 4) after one round, times 3 each round after: exact in bf16.
      BOOST_TEST(got[r][i] == float(i % 4) * 6 * 27, "rank " << r << " element " << i);
    }
  }
  for (auto c : comms) ncclCommDestroy(c);
}

// Stream capture: what the capturing thread issues (a launch, an asynchronous copy from pinned
// memory, a GEMM) is recorded, not run; each cudaGraphLaunch runs it all, reading the pinned
// buffer as it is then; what a GPU refuses during a capture breaks it.
BOOST_AUTO_TEST_CASE(a_captured_stream_runs_nothing_until_its_graph_launches_and_then_each_time) {
  cudaStream_t s = nullptr;
  BOOST_REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  cublasHandle_t h = nullptr;
  BOOST_REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  const int threads = 64;
  std::vector<float> in(threads, 1.0f);
  Device<float> din(threads), dsum(1), a(std::vector<float>{2.0f}), b(std::vector<float>{3.0f}), c(std::vector<float>{0.0f});
  float* pinned = nullptr;
  BOOST_REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), threads * sizeof(float)) == cudaSuccess);
  std::copy(in.begin(), in.end(), pinned);
  const auto before = cuda_emu::counts();

  BOOST_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaStreamCaptureStatus status{};
  BOOST_TEST((cudaStreamIsCapturing(s, &status) == cudaSuccess && status == cudaStreamCaptureStatusActive));
  BOOST_REQUIRE(cudaMemcpyAsync(din.ptr, pinned, threads * sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess);
  cuda_emu_test::block_sum_on(din.ptr, dsum.ptr, 1, threads, s);
  const float one = 1.0f, zero = 0.0f;
  BOOST_REQUIRE(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a.ptr, CUDA_R_32F, 1, b.ptr, CUDA_R_32F, 1,
                             &zero, c.ptr, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  cudaGraph_t graph = nullptr;
  BOOST_REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  BOOST_TEST(c.host()[0] == 0.0f);  // nothing ran
  BOOST_TEST(cuda_emu::counts().total() == before.total());

  cudaGraphExec_t exec = nullptr;
  BOOST_REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  BOOST_REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  BOOST_TEST(dsum.host()[0] == float(threads));
  BOOST_TEST(c.host()[0] == 6.0f);
  std::fill(pinned, pinned + threads, 2.0f);  // the copy reads the pinned buffer at each launch
  BOOST_REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  BOOST_TEST(dsum.host()[0] == float(2 * threads));
  const auto after = cuda_emu::counts();
  BOOST_TEST(after.graph_launches - before.graph_launches == 2u);
  BOOST_TEST(after.launches - before.launches == 2u);
  BOOST_TEST(after.copies - before.copies == 2u);
  BOOST_TEST(after.gemms - before.gemms == 2u);
  BOOST_TEST(after.replayed - before.replayed == 6u);
  BOOST_TEST(after.host_calls() - before.host_calls() == 2u);  // the two graph launches
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // A synchronisation, a synchronous copy, a copy from pageable memory or an allocation during a
  // capture: refused, and the capture with it.
  const auto refused = [&](auto call) {
    BOOST_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    BOOST_TEST(call() == cudaErrorStreamCaptureUnsupported);
    cudaGraph_t g = nullptr;
    BOOST_TEST(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
    BOOST_TEST(g == nullptr);
    cudaGetLastError();
  };
  refused([&] { return cudaStreamSynchronize(s); });
  refused([&] { return cudaMemcpy(din.ptr, pinned, sizeof(float), cudaMemcpyHostToDevice); });
  refused([&] { return cudaMemcpyAsync(din.ptr, in.data(), sizeof(float), cudaMemcpyHostToDevice, s); });  // pageable
  refused([&] {
    void* p = nullptr;
    return cudaMalloc(&p, 64);
  });
  cudaFreeHost(pinned);
  cublasDestroy(h);
  cudaStreamDestroy(s);
}

// Streams: an asynchronous copy waits on its stream for as long as CUDA's ordering allows, so work
// on another stream that reads its destination without waiting for it sees the old bytes, as it
// may on a GPU; each thing that orders it (an event waited for or synchronised, the stream's
// next operation or synchronisation, the device's, a free, the legacy default stream for a
// blocking stream) runs it. A pageable source is staged at the call; to pageable memory the call
// returns with the copy done.
BOOST_AUTO_TEST_CASE(an_asynchronous_copy_is_seen_on_another_stream_only_once_something_orders_it) {
  cudaStream_t copier = nullptr, reader = nullptr, blocking = nullptr;
  BOOST_REQUIRE(cudaStreamCreateWithFlags(&copier, cudaStreamNonBlocking) == cudaSuccess);
  BOOST_REQUIRE(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking) == cudaSuccess);
  BOOST_REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  cudaEvent_t copied = nullptr;
  BOOST_REQUIRE(cudaEventCreate(&copied) == cudaSuccess);
  const int threads = 32;
  const std::size_t bytes = threads * sizeof(float);
  float* pinned = nullptr;
  BOOST_REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), 2 * bytes) == cudaSuccess);
  std::fill(pinned, pinned + 2 * threads, 1.0f);
  Device<float> din(std::vector<float>(threads, 0.0f)), din2(std::vector<float>(threads, 0.0f)), dsum(1);
  const auto sum_on_reader = [&] {
    cuda_emu_test::block_sum_on(din.ptr, dsum.ptr, 1, threads, reader);
    BOOST_REQUIRE(cudaStreamSynchronize(reader) == cudaSuccess);
    return dsum.host()[0];
  };

  BOOST_REQUIRE(cudaMemcpyAsync(din.ptr, pinned, bytes, cudaMemcpyHostToDevice, copier) == cudaSuccess);
  BOOST_REQUIRE(cudaEventRecord(copied, copier) == cudaSuccess);
  BOOST_TEST(sum_on_reader() == 0.0f);  // the reader did not wait: the old zeros
  BOOST_REQUIRE(cudaStreamWaitEvent(reader, copied, 0) == cudaSuccess);
  BOOST_TEST(sum_on_reader() == float(threads));

  // cudaEventQuery: not ready while the copies wait, and a loop that polls gets there.
  BOOST_REQUIRE(cudaMemcpyAsync(din2.ptr, pinned, bytes, cudaMemcpyHostToDevice, copier) == cudaSuccess);
  BOOST_REQUIRE(cudaEventRecord(copied, copier) == cudaSuccess);
  BOOST_TEST(cudaEventQuery(copied) == cudaErrorNotReady);
  int polls = 1;
  while (cudaEventQuery(copied) == cudaErrorNotReady && polls < 100) ++polls;
  BOOST_TEST(polls == 1);
  BOOST_TEST(din2.host()[0] == 1.0f);

  // An event orders what came before it on its stream, not what came after.
  std::fill(pinned, pinned + threads, 2.0f);
  std::fill(pinned + threads, pinned + 2 * threads, 3.0f);
  BOOST_REQUIRE(cudaMemcpyAsync(din.ptr, pinned, bytes, cudaMemcpyHostToDevice, copier) == cudaSuccess);
  BOOST_REQUIRE(cudaEventRecord(copied, copier) == cudaSuccess);
  BOOST_REQUIRE(cudaMemcpyAsync(din2.ptr, pinned + threads, bytes, cudaMemcpyHostToDevice, copier) == cudaSuccess);
  BOOST_REQUIRE(cudaEventSynchronize(copied) == cudaSuccess);
  BOOST_TEST(din.host()[0] == 2.0f);
  BOOST_TEST(din2.host()[0] == 1.0f);  // a synchronous copy waits for blocking streams only
  BOOST_REQUIRE(cudaStreamSynchronize(copier) == cudaSuccess);
  BOOST_TEST(din2.host()[0] == 3.0f);

  // A pageable source is staged by the call; a pageable destination is written before it returns.
  std::vector<float> pageable(threads, 5.0f);
  BOOST_REQUIRE(cudaMemcpyAsync(din.ptr, pageable.data(), bytes, cudaMemcpyHostToDevice, copier) == cudaSuccess);
  std::fill(pageable.begin(), pageable.end(), 6.0f);
  std::vector<float> back(threads, 0.0f);
  BOOST_REQUIRE(cudaMemcpyAsync(back.data(), din.ptr, bytes, cudaMemcpyDeviceToHost, copier) == cudaSuccess);
  BOOST_TEST(back[0] == 5.0f);

  // 2-D copies and memsets wait as copies do; the device's synchronisation and a free run them.
  BOOST_REQUIRE(cudaMemcpy2DAsync(din.ptr, sizeof(float), pinned, 2 * sizeof(float), sizeof(float), threads / 2,
                                  cudaMemcpyHostToDevice, copier) == cudaSuccess);
  BOOST_TEST(din.host()[0] == 5.0f);
  BOOST_REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto strided = din.host();
  BOOST_TEST(strided[0] == 2.0f);
  BOOST_TEST(strided[threads / 2 - 1] == 2.0f);
  BOOST_TEST(strided[threads / 2] == 5.0f);  // past the rows copied
  BOOST_REQUIRE(cudaMemsetAsync(din2.ptr, 0, bytes, copier) == cudaSuccess);
  BOOST_TEST(din2.host()[0] == 3.0f);
  {
    Device<float> other(1);
  }  // its cudaFree runs what every stream has pending
  BOOST_TEST(din2.host()[0] == 0.0f);

  // A blocking stream's copies: the legacy default stream (a synchronous copy) waits for them.
  BOOST_REQUIRE(cudaMemcpyAsync(din.ptr, pinned + threads, bytes, cudaMemcpyHostToDevice, blocking) == cudaSuccess);
  BOOST_TEST(din.host()[0] == 3.0f);

  // A launch runs after its own stream's copies; a destroyed stream's copies still run.
  std::fill(pinned, pinned + threads, 4.0f);
  BOOST_REQUIRE(cudaMemcpyAsync(din.ptr, pinned, bytes, cudaMemcpyHostToDevice, reader) == cudaSuccess);
  BOOST_TEST(sum_on_reader() == float(4 * threads));
  BOOST_REQUIRE(cudaMemcpyAsync(din.ptr, pinned + threads, bytes, cudaMemcpyHostToDevice, copier) == cudaSuccess);
  BOOST_REQUIRE(cudaEventRecord(copied, copier) == cudaSuccess);
  BOOST_REQUIRE(cudaStreamDestroy(std::exchange(copier, nullptr)) == cudaSuccess);
  BOOST_TEST(din.host()[0] == 3.0f);
  BOOST_TEST(cudaEventQuery(copied) == cudaSuccess);  // its stream is gone, its work done
  // A new stream (perhaps at the old one's address) with copies waiting: the old event is not its.
  BOOST_REQUIRE(cudaStreamCreateWithFlags(&copier, cudaStreamNonBlocking) == cudaSuccess);
  BOOST_REQUIRE(cudaMemcpyAsync(din.ptr, pinned, bytes, cudaMemcpyHostToDevice, copier) == cudaSuccess);
  BOOST_TEST(cudaEventQuery(copied) == cudaSuccess);
  BOOST_TEST(din.host()[0] == 3.0f);
  BOOST_REQUIRE(cudaStreamSynchronize(copier) == cudaSuccess);
  BOOST_TEST(din.host()[0] == 4.0f);
  // Host to host is synchronous, pinned or not.
  std::vector<float> h(threads, 0.0f);
  BOOST_REQUIRE(cudaMemcpyAsync(h.data(), pinned, bytes, cudaMemcpyHostToHost, copier) == cudaSuccess);
  BOOST_TEST(h[0] == 4.0f);

  cudaEventDestroy(copied);
  cudaFreeHost(pinned);
  for (cudaStream_t s : {copier, reader, blocking}) cudaStreamDestroy(s);
}
