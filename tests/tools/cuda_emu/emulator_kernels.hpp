#pragma once
// Launchers of emulator_kernels.cu: kernels that exercise tools/cuda_emu. Pointers are device
// memory (cudaMalloc).

#include <cuda_runtime_api.h>

#include <cstddef>

namespace cuda_emu_test {

// out[b] = the sum of in[b * threads .. (b + 1) * threads) (block_sum of block_reduce.cuh).
void block_sum(const float* in, float* out, int blocks, int threads);
// The same on `stream`, without waiting for it (what a stream capture may record).
void block_sum_on(const float* in, float* out, int blocks, int threads, cudaStream_t stream);
// out[i] = i - 1 (out[0] = 0), written by thread i - 1 into shared memory; without the barrier
// the read may come first.
void neighbours(float* out, int threads, bool barrier);
// out[i] = the index of the next lane of i's warp (lane 31: lane 0), written by that lane into
// shared memory before a __syncwarp (or none).
void warp_neighbours(float* out, int threads, bool sync);
// Per thread 4 ints: shfl from lane 5 of lane * 10, shfl_xor 1 of lane, shfl_down 4 of lane,
// ballot of lane % 3 == 0.
void warp_ops(int* out, int threads);
// Kernels the emulator must refuse (std::runtime_error from the launch).
void divergent(int* out);
void missing_lane(int* out);       // a shuffle from a lane a 48-thread block lacks
void mixed_collectives(int* out);  // a shuffle and a ballot in one warp at once
// Per lane (32): __shfl_xor_sync(lane, 12, width 8), __shfl_down_sync(lane, 3, width 8).
void narrow_shuffles(int* out);
void exited_lanes(int* out);
void big_static_shared(float* out);
// out[i] = v over blocks × threads, with `dynamic_shared` bytes asked: the launch's error.
cudaError_t fill(float* out, unsigned blocks, unsigned threads, std::size_t dynamic_shared, float v);
// cudaFuncSetAttribute(fill's kernel, MaxDynamicSharedMemorySize, bytes).
cudaError_t allow_dynamic_shared(int bytes);

}  // namespace cuda_emu_test
