#pragma once
// What the emulated runtime (tools/cuda_emu/runtime.cpp) tells the other emulated parts: the
// device kernels (device.hpp), cuBLAS (blas.cpp) and NCCL (nccl.cpp).

#include "kernels/cuda/elementwise.hpp"  // ActDtype

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace cuda_emu {

// Whether [p, p + bytes) lies inside one device allocation (tools/cuda_emu/runtime.cpp).
bool device_range(const void* p, std::size_t bytes);
// The device the calling thread works on (cudaSetDevice), and how many there are
// (CUDA_EMU_DEVICES, default 1).
int current_device();
int device_count();

// Element i of f32, f16 or bf16 memory, widened to float; and a float rounded to nearest even
// into it (cuBLAS's and NCCL's outputs).
float load(const void* p, actorlm::kernels::cuda::ActDtype t, std::size_t i);
void store(void* p, actorlm::kernels::cuda::ActDtype t, std::size_t i, float v);
// Elements [first, first + n) of such memory widened into out[n] (load's values, in bulk).
void load_floats(const void* p, actorlm::kernels::cuda::ActDtype t, std::size_t first, std::size_t n, float* out);

// What the emulation has run since the process started, each a stream operation that a GPU
// queues for one launch or more: kernel launches, asynchronous copies and memsets, cuBLAS GEMMs,
// NCCL all-reduces (all threads together). A step's count is what CUDA graphs would save the host.
// Operations run by graph launches count as they run, and in `replayed` too; graph_launches
// counts the launches. The host issued total() - replayed + graph_launches calls.
struct Counts {
  std::uint64_t launches = 0, copies = 0, gemms = 0, all_reduces = 0, graph_launches = 0, replayed = 0;
  std::uint64_t total() const { return launches + copies + gemms + all_reduces; }
  std::uint64_t host_calls() const { return total() - replayed + graph_launches; }
};
Counts counts();
enum class Counted { launch, copy, gemm, all_reduce, graph_launch, replayed };
void count(Counted what);

// Stream capture (tools/cuda_emu/graph.cpp): whether the calling thread is capturing; record()
// keeps an operation for the graph instead of running it; refused_in_capture() fails a call a GPU
// refuses during a capture, and breaks the capture.
bool capturing();
void record(std::function<void()> op);
cudaError_t refused_in_capture();

// Streams (tools/cuda_emu/streams.cpp). before_op: an operation is about to run on `s` now, so
// what `s` has pending runs first (stream 0, the legacy default stream: what every stream of the
// device created without cudaStreamNonBlocking has pending). defer: `op` left pending on `s`
// until something orders it (on stream 0: run now). synchronize_device: what every stream of the
// current device has pending runs (cudaDeviceSynchronize); synchronize_legacy: those
// the legacy default stream waits for (a synchronous copy or memset).
void before_op(cudaStream_t s);
void defer(cudaStream_t s, std::function<void()> op);
void synchronize_device();
void synchronize_legacy();
void synchronize_all();  // every device's streams: before a free

// Records the launch's error for cudaGetLastError (tools/cuda_emu/runtime.cpp).
void set_last_error(cudaError_t e);
// The dynamic shared memory limit cudaFuncSetAttribute gave `kernel` (48 KiB without one).
std::size_t dynamic_shared_limit(const void* kernel);

}  // namespace cuda_emu
