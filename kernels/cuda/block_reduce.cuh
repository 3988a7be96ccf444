#pragma once
// Thread-block reductions for .cu files: every thread passes its value and gets the block's
// result. blockDim.x must be a multiple of the warp size; `shared` is [32] floats, free again
// on return (the caller may start the next reduction at once).

#include <cmath>

namespace actorlm::kernels::cuda {

template <class Op>
__device__ float block_reduce(float v, float* shared, Op op, float identity) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x / 32) ? shared[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ inline float block_sum(float v, float* shared) { return block_reduce(v, shared, SumOp{}, 0.0f); }
__device__ inline float block_max(float v, float* shared) { return block_reduce(v, shared, MaxOp{}, -INFINITY); }

// The sum of v over one warp, in every lane.
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The maximum of v over one warp, in every lane.
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Any associative merge over a block of `Threads` threads (a power of two, blockDim.x):
// `shared` is [Threads]; every thread gets the result, and `shared` is free again on return.
template <int Threads, class T, class Merge>
__device__ T block_merge(T v, T* shared, Merge merge) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = Threads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) shared[threadIdx.x] = merge(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  const T out = shared[0];
  __syncthreads();
  return out;
}

}  // namespace actorlm::kernels::cuda
