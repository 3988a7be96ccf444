#pragma once
// The device side of CUDA for a .cu file compiled as host C++ (tools/cuda_emu): force-included
// (-include) into the sources that tools/cuda_emu/cu_to_cpp.py writes from kernels/cuda/*.cu,
// which replaces `k<<<grid, block, smem, stream>>>(args)` with cuda_emu::launch and each
// __shared__ declaration with cuda_emu::shared_static / shared_dynamic. Over tools/cuda_emu/grid.hpp
// it defines the built-in variables, the warp collectives, atomics and bit intrinsics the kernels
// use. The host compiler's math (expf, fmaxf ...) stands in for the device's: fine for the
// kernels here, which use no fast-math intrinsics. Atomics are plain: a block's threads take
// turns on one OS thread and the blocks run one after another.

#include "tools/cuda_emu/grid.hpp"
#include "tools/cuda_emu/host.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>  // before the macros below: it names parameters gridDim and blockDim
#include <vector_functions.h>
#include <vector_types.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

// A __shared__ that cu_to_cpp.py did not rewrite must not compile as a per-thread variable
// (the CUDA headers define it away for host compilers).
#undef __shared__
#define __shared__ cuda_emu_untranslated_shared_declaration
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
#define threadIdx (::cuda_emu::thread_index())
#define blockIdx (::cuda_emu::block_index())
#define blockDim (::cuda_emu::block_dim())
#define gridDim (::cuda_emu::grid_dim())

namespace cuda_emu {

// The <<<grid, block, shared memory, stream>>> of a launch.
struct LaunchArgs {
  LaunchArgs(dim3 g, dim3 b, std::size_t smem = 0, cudaStream_t s = nullptr) : grid(g), block(b), shared(smem), stream(s) {}
  dim3 grid, block;
  std::size_t shared;
  cudaStream_t stream;
};

// kernel<<<a>>>(args...): the arguments converted to the kernel's parameter types as a launch
// converts them, then the grid run at once, after what its stream has pending (the launch is
// synchronous: whatever the stream orders after it waits for it anyway). A shape the GPU refuses
// sets the error cudaGetLastError returns, as there.
template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), const LaunchArgs& a, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "cuda_emu: a kernel launched with the wrong number of arguments");
  LaunchShape shape;
  shape.grid = {a.grid.x, a.grid.y, a.grid.z};
  shape.block = {a.block.x, a.block.y, a.block.z};
  shape.dynamic_shared = a.shared;
  shape.dynamic_shared_limit = dynamic_shared_limit(reinterpret_cast<const void*>(kernel));
  if (launch_shape_error(shape) != nullptr) {
    set_last_error(cudaErrorInvalidConfiguration);
    return;
  }
  std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  if (capturing()) {  // kept, with its arguments as they are now, for the graph
    record([name, shape, kernel, params] { run_grid(name, shape, [&] { std::apply(kernel, params); }); });
    return;
  }
  before_op(a.stream);
  run_grid(name, shape, [&] { std::apply(kernel, params); });
}

template <class T>
T& shared_static(const char* function, int key) {
  return *static_cast<T*>(shared_static(function, key, sizeof(T), alignof(T)));
}
template <class T>
T* shared_dynamic() {
  return static_cast<T*>(shared_dynamic());
}

template <class T>
T shuffle_from(unsigned mask, const T& v, int src_of_this_lane) {
  static_assert(sizeof(T) <= 16 && std::is_trivially_copyable_v<T>);
  struct Deposit {
    T value;
    int src;
  };
  static_assert(sizeof(Deposit) <= 16, "cuda_emu: a shuffled value of more than 12 bytes");
  const Deposit mine{v, src_of_this_lane};
  const WarpDeposits d = warp_gather(mask, &mine, sizeof mine, Collective::shuffle);
  if ((d.present >> (src_of_this_lane & 31) & 1u) == 0) shuffle_from_missing_lane(src_of_this_lane & 31);
  Deposit from;
  std::memcpy(&from, d.slots + 16 * (src_of_this_lane & 31), sizeof from);
  return from.value;
}

}  // namespace cuda_emu

inline void __syncthreads() { ::cuda_emu::sync_threads(); }
// Every lane of the warp waits for the others (a full mask only, as the other collectives).
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::cuda_emu::warp_gather(mask, nullptr, 0, ::cuda_emu::Collective::sync);
}

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int l = ::cuda_emu::lane_id();
  return ::cuda_emu::shuffle_from(mask, v, (l & ~(width - 1)) + (src & (width - 1)));
}
// CUDA: a lane may read from its own group of `width` lanes or an earlier one; from a later
// group it gets its own value.
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int l = ::cuda_emu::lane_id();
  const int src = (l ^ lane_mask) & 31;
  return ::cuda_emu::shuffle_from(mask, v, src < (l & ~(width - 1)) + width ? src : l);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int l = ::cuda_emu::lane_id();
  const int src = l + int(delta & 31);
  return ::cuda_emu::shuffle_from(mask, v, src < (l & ~(width - 1)) + width ? src : l);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const unsigned char p = predicate != 0;
  const ::cuda_emu::WarpDeposits d = ::cuda_emu::warp_gather(mask, &p, 1, ::cuda_emu::Collective::ballot);
  unsigned out = 0;
  for (int l = 0; l < 32; ++l)
    if ((d.present >> l & 1u) && d.slots[16 * l] != 0) out |= 1u << l;
  return out;
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }

inline float __uint_as_float(unsigned x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}
inline float __int_as_float(int x) { return __uint_as_float(static_cast<unsigned>(x)); }
inline int __float_as_int(float f) { return static_cast<int>(__float_as_uint(f)); }

// IEEE round-to-nearest operations, never fused (the sources are compiled with -ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }

// Cache-hinted loads are plain loads.
template <class T>
T __ldcs(const T* p) { return *p; }
template <class T>
T __ldg(const T* p) { return *p; }
template <class T>
T __ldcg(const T* p) { return *p; }

template <class T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <class T>
T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}
template <class T>
T atomicMin(T* p, T v) {
  const T old = *p;
  if (v < old) *p = v;
  return old;
}
template <class T>
T atomicExch(T* p, T v) {
  const T old = *p;
  *p = v;
  return old;
}
template <class T>
T atomicCAS(T* p, T compare, T v) {
  const T old = *p;
  if (old == compare) *p = v;
  return old;
}

// CUDA's min and max for integers of one type (the float ones are fminf / fmaxf, as on the device).
#define CUDA_EMU_MIN_MAX(T)                        \
  inline T min(T a, T b) { return b < a ? b : a; } \
  inline T max(T a, T b) { return a < b ? b : a; }
CUDA_EMU_MIN_MAX(int)
CUDA_EMU_MIN_MAX(unsigned)
CUDA_EMU_MIN_MAX(long)
CUDA_EMU_MIN_MAX(unsigned long)
CUDA_EMU_MIN_MAX(long long)
CUDA_EMU_MIN_MAX(unsigned long long)
CUDA_EMU_MIN_MAX(float)
CUDA_EMU_MIN_MAX(double)
#undef CUDA_EMU_MIN_MAX

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

// cuda_runtime.h declares this overload for nvcc only.
template <class T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
