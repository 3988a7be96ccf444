// Kernels that exercise tools/cuda_emu itself (emulator_test.cpp): each launcher runs one on
// device memory it is given and synchronises.
#include "tests/tools/cuda_emu/emulator_kernels.hpp"

#include "kernels/cuda/block_reduce.cuh"

namespace cuda_emu_test {

namespace {

namespace k = actorlm::kernels::cuda;

__global__ void block_sum_kernel(const float* in, float* out) {
  __shared__ float scratch[32];
  const float v = k::block_sum(in[blockIdx.x * blockDim.x + threadIdx.x], scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// Thread i writes its slot and reads thread i - 1's (thread 0 its own), with or without a
// barrier between: threads run in ascending order would never read an unwritten slot.
__global__ void neighbour_kernel(float* out, bool barrier) {
  extern __shared__ float slots[];
  slots[threadIdx.x] = float(threadIdx.x);
  if (barrier) __syncthreads();
  out[threadIdx.x] = slots[threadIdx.x == 0 ? 0 : threadIdx.x - 1];
}

// Each lane reads the slot the next lane of its warp wrote (lane 31: lane 0's).
__global__ void warp_neighbour_kernel(float* out, bool sync) {
  extern __shared__ float slots[];
  slots[threadIdx.x] = float(threadIdx.x);
  if (sync) __syncwarp();
  out[threadIdx.x] = slots[threadIdx.x / 32 * 32 + (threadIdx.x + 1) % 32];
}

// A block of 48 threads: its second warp has 16 lanes, and lane 0 of it reads lane 20.
__global__ void missing_lane_kernel(int* out) { out[threadIdx.x] = __shfl_sync(0xffffffffu, int(threadIdx.x), 20); }

// Half of each warp at a shuffle, the other half at a ballot.
__global__ void mixed_collectives_kernel(int* out) {
  if (threadIdx.x % 32 < 16) out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
  else out[threadIdx.x] = int(__ballot_sync(0xffffffffu, 1));
}

// Shuffles within groups of 8 lanes: xor 12 reaches a later group for lanes 0-3 of a group.
__global__ void narrow_shuffles_kernel(int* out) {
  const int lane = threadIdx.x % 32;
  out[2 * threadIdx.x] = __shfl_xor_sync(0xffffffffu, lane, 12, 8);
  out[2 * threadIdx.x + 1] = __shfl_down_sync(0xffffffffu, lane, 3, 8);
}

__global__ void warp_ops_kernel(int* out) {
  const int lane = threadIdx.x % 32;
  int* o = out + 4 * threadIdx.x;
  o[0] = __shfl_sync(0xffffffffu, lane * 10, 5);
  o[1] = __shfl_xor_sync(0xffffffffu, lane, 1);
  o[2] = __shfl_down_sync(0xffffffffu, lane, 4);
  o[3] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
}

// A full-mask shuffle in a branch half of each warp takes: those lanes wait for the other half,
// which waits at __syncthreads for them.
__global__ void divergent_kernel(int* out) {
  if (threadIdx.x % 32 < 16) out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
  __syncthreads();
}

__global__ void exited_lanes_kernel(int* out) {
  if (threadIdx.x % 32 >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void big_static_shared_kernel(float* out) {
  __shared__ float big[13 * 1024];  // 52 KiB
  big[threadIdx.x] = 1;
  __syncthreads();
  out[threadIdx.x] = big[threadIdx.x];
}

__global__ void fill_kernel(float* out, float v) { out[blockIdx.x * blockDim.x + threadIdx.x] = v; }

}  // namespace

void block_sum(const float* in, float* out, int blocks, int threads) {
  block_sum_kernel<<<blocks, threads>>>(in, out);
  cudaDeviceSynchronize();
}

void block_sum_on(const float* in, float* out, int blocks, int threads, cudaStream_t stream) {
  block_sum_kernel<<<blocks, threads, 0, stream>>>(in, out);
}

void neighbours(float* out, int threads, bool barrier) {
  neighbour_kernel<<<1, threads, threads * sizeof(float)>>>(out, barrier);
  cudaDeviceSynchronize();
}

void warp_neighbours(float* out, int threads, bool sync) {
  warp_neighbour_kernel<<<1, threads, threads * sizeof(float)>>>(out, sync);
  cudaDeviceSynchronize();
}

void warp_ops(int* out, int threads) {
  warp_ops_kernel<<<1, threads>>>(out);
  cudaDeviceSynchronize();
}

void divergent(int* out) { divergent_kernel<<<1, 64>>>(out); }
void missing_lane(int* out) { missing_lane_kernel<<<1, 48>>>(out); }
void mixed_collectives(int* out) { mixed_collectives_kernel<<<1, 32>>>(out); }
void narrow_shuffles(int* out) {
  narrow_shuffles_kernel<<<1, 32>>>(out);
  cudaDeviceSynchronize();
}
void exited_lanes(int* out) { exited_lanes_kernel<<<1, 32>>>(out); }
void big_static_shared(float* out) { big_static_shared_kernel<<<1, 32>>>(out); }

cudaError_t fill(float* out, unsigned blocks, unsigned threads, std::size_t dynamic_shared, float v) {
  fill_kernel<<<blocks, threads, dynamic_shared>>>(out, v);
  return cudaGetLastError();
}

cudaError_t allow_dynamic_shared(int bytes) {
  return cudaFuncSetAttribute(fill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

}  // namespace cuda_emu_test
