// The CUDA runtime API calls actorlm makes, over host memory (tools/cuda_emu): one device, the
// declarations of the toolkit's own cuda_runtime_api.h, no libcudart. Device memory is host
// memory that the emulator tracks, so a copy or memset that runs past a device allocation is an
// error here (cudaErrorInvalidValue), as the driver's checks and compute-sanitizer would make it.
// Kernels run when launched; asynchronous copies and memsets wait on their stream as long as
// CUDA's ordering allows (tools/cuda_emu/streams.cpp). CUDA_EMU_DEVICES devices
// (default 1) of CUDA_EMU_MEMORY_MIB (default 2,048) MiB each, so that a memory plan sized from
// cudaMemGetInfo stays small; an allocation counts against the device current when it was made.
#include "tools/cuda_emu/device.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace cuda_emu {

namespace {

thread_local cudaError_t last_error = cudaSuccess;

thread_local int device_of_thread = 0;

struct Allocation {
  std::size_t bytes = 0;
  int device = -1;  // -1: pinned host memory
};

class Allocations {
 public:
  cudaError_t allocate(void** out, std::size_t bytes, bool device) {
    if (out == nullptr) return cudaErrorInvalidValue;
    std::lock_guard lock(mu_);
    const int d = device ? device_of_thread : -1;
    if (device && device_bytes_[d] + bytes > total()) return cudaErrorMemoryAllocation;
    void* p = std::aligned_alloc(256, std::max<std::size_t>(256, (bytes + 255) / 256 * 256));
    if (p == nullptr) return cudaErrorMemoryAllocation;
    (device ? device_ : host_)[reinterpret_cast<std::uintptr_t>(p)] = {bytes, d};
    if (device) device_bytes_[d] += bytes;
    *out = p;
    return cudaSuccess;
  }
  cudaError_t release(void* p, bool device) {
    if (p == nullptr) return cudaSuccess;
    std::lock_guard lock(mu_);
    auto& m = device ? device_ : host_;
    auto it = m.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == m.end()) return cudaErrorInvalidValue;
    if (device) device_bytes_[it->second.device] -= it->second.bytes;
    m.erase(it);
    std::free(p);
    return cudaSuccess;
  }
  // Whether [p, p + n) lies inside one device allocation (or one pinned host allocation).
  bool on_device(const void* p, std::size_t n) { return inside(device_, p, n); }
  bool pinned(const void* p, std::size_t n) { return inside(host_, p, n); }
  std::size_t total() const {
    static const std::size_t mib = [] {
      const char* s = std::getenv("CUDA_EMU_MEMORY_MIB");
      return s != nullptr ? std::strtoull(s, nullptr, 10) : 2048ULL;
    }();
    return mib << 20;
  }
  // What the calling thread's current device holds.
  std::size_t device_bytes() {
    std::lock_guard lock(mu_);
    return device_bytes_[device_of_thread];
  }

 private:
  bool inside(const std::map<std::uintptr_t, Allocation>& m, const void* p, std::size_t n) {
    std::lock_guard lock(mu_);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = m.upper_bound(a);
    if (it == m.begin()) return false;
    --it;
    return a + n <= it->first + it->second.bytes;
  }
  std::mutex mu_;
  std::map<std::uintptr_t, Allocation> device_, host_;
  std::map<int, std::size_t> device_bytes_;
};

Allocations& allocations() {
  static Allocations* a = new Allocations;  // device memory may be freed by static destructors
  return *a;
}

cudaError_t fail(cudaError_t e) { return last_error = e; }

// Whether a copy of `kind` reading [src, src + src_span) and writing [dst, dst + dst_span) stays
// inside the device allocations its kind names (either side for cudaMemcpyDefault).
bool copy_ok(void* dst, std::size_t dst_span, const void* src, std::size_t src_span, cudaMemcpyKind kind) {
  if (dst_span == 0 && src_span == 0) return true;
  auto& a = allocations();
  switch (kind) {
    case cudaMemcpyHostToDevice: return a.on_device(dst, dst_span);
    case cudaMemcpyDeviceToHost: return a.on_device(src, src_span);
    case cudaMemcpyDeviceToDevice: return a.on_device(dst, dst_span) && a.on_device(src, src_span);
    case cudaMemcpyHostToHost: return true;
    default: return a.on_device(dst, dst_span) || a.on_device(src, src_span);
  }
}

std::mutex attributes_mu;
std::map<const void*, std::size_t> dynamic_limits;

constexpr int sm_count = 132;  // as an H100 SXM
constexpr int shared_per_sm = 228 * 1024;

}  // namespace

void set_last_error(cudaError_t e) { last_error = e; }

bool device_range(const void* p, std::size_t bytes) { return allocations().on_device(p, bytes); }

float load(const void* p, actorlm::kernels::cuda::ActDtype t, std::size_t i) {
  switch (t) {
    case actorlm::kernels::cuda::ActDtype::f16: return __half2float(static_cast<const __half*>(p)[i]);
    case actorlm::kernels::cuda::ActDtype::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

void load_floats(const void* p, actorlm::kernels::cuda::ActDtype t, std::size_t first, std::size_t n, float* out) {
  switch (t) {
    case actorlm::kernels::cuda::ActDtype::f16: {
      const __half* x = static_cast<const __half*>(p) + first;
      for (std::size_t i = 0; i < n; ++i) out[i] = __half2float(x[i]);
      break;
    }
    case actorlm::kernels::cuda::ActDtype::bf16: {
      const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p) + first;
      for (std::size_t i = 0; i < n; ++i) out[i] = __bfloat162float(x[i]);
      break;
    }
    default: std::memcpy(out, static_cast<const float*>(p) + first, n * sizeof(float));
  }
}

void store(void* p, actorlm::kernels::cuda::ActDtype t, std::size_t i, float v) {
  switch (t) {
    case actorlm::kernels::cuda::ActDtype::f16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case actorlm::kernels::cuda::ActDtype::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v;
  }
}

int current_device() { return device_of_thread; }
int device_count() {
  static const int n = [] {
    const char* s = std::getenv("CUDA_EMU_DEVICES");
    return s != nullptr ? std::max(1, std::atoi(s)) : 1;
  }();
  return n;
}

std::size_t dynamic_shared_limit(const void* kernel) {
  std::lock_guard lock(attributes_mu);
  auto it = dynamic_limits.find(kernel);
  return it == dynamic_limits.end() ? 48 * 1024 : it->second;
}

namespace {
std::atomic<std::uint64_t> counted[6];
}  // namespace

void count(Counted what) { counted[static_cast<int>(what)].fetch_add(1, std::memory_order_relaxed); }

Counts counts() {
  auto at = [](Counted c) { return counted[static_cast<int>(c)].load(std::memory_order_relaxed); };
  return {at(Counted::launch), at(Counted::copy), at(Counted::gemm), at(Counted::all_reduce),
          at(Counted::graph_launch), at(Counted::replayed)};
}

}  // namespace cuda_emu

namespace e = cuda_emu;

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return e::fail(cudaErrorInvalidValue);
  *count = e::device_count();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= e::device_count()) return e::fail(cudaErrorInvalidDevice);
  e::device_of_thread = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return e::fail(cudaErrorInvalidValue);
  *device = e::current_device();
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (p == nullptr) return e::fail(cudaErrorInvalidValue);
  if (device < 0 || device >= e::device_count()) return e::fail(cudaErrorInvalidDevice);
  std::memset(p, 0, sizeof *p);
  std::strncpy(p->name, "cuda_emu (host emulator)", sizeof p->name - 1);
  p->totalGlobalMem = e::allocations().total();
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = 227 * 1024;
  p->sharedMemPerMultiprocessor = e::shared_per_sm;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff, p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->major = 9, p->minor = 0;
  p->multiProcessorCount = e::sm_count;
  p->maxThreadsPerMultiProcessor = 2048;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return e::fail(cudaErrorInvalidValue);
  if (device < 0 || device >= e::device_count()) return e::fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = e::sm_count; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 * 1024; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = e::shared_per_sm; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    default: return e::fail(cudaErrorInvalidValue);  // not emulated: say so rather than make one up
  }
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (e::capturing()) return e::refused_in_capture();
  const cudaError_t r = e::allocations().allocate(p, bytes, true);
  return r == cudaSuccess ? r : e::fail(r);
}
cudaError_t cudaFree(void* p) {
  if (e::capturing()) return e::refused_in_capture();
  e::synchronize_all();  // as cudaFree does (its device, whichever the calling thread's is)
  const cudaError_t r = e::allocations().release(p, true);
  return r == cudaSuccess ? r : e::fail(r);
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  if (e::capturing()) return e::refused_in_capture();
  const cudaError_t r = e::allocations().allocate(p, bytes, false);
  return r == cudaSuccess ? r : e::fail(r);
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) { return cudaMallocHost(p, bytes); }
cudaError_t cudaFreeHost(void* p) {
  if (e::capturing()) return e::refused_in_capture();
  e::synchronize_all();
  const cudaError_t r = e::allocations().release(p, false);
  return r == cudaSuccess ? r : e::fail(r);
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return e::fail(cudaErrorInvalidValue);
  *total = e::allocations().total();
  *free = *total - e::allocations().device_bytes();
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  return cudaMemcpy2D(dst, n, src, n, n, 1, kind);
}
namespace {

// Where an asynchronous copy of `kind` meets pageable host memory: its source (staged before the
// call returns, so the caller may reuse it at once) or its destination (the call returns once
// the copy is done).
struct Pageable {
  bool src = false, dst = false;
};
// Host to host is synchronous whatever the memory, as CUDA documents: counted as a pageable
// destination.
Pageable pageable(void* dst, std::size_t dst_span, const void* src, std::size_t src_span, cudaMemcpyKind kind) {
  auto& a = e::allocations();
  switch (kind) {
    case cudaMemcpyHostToDevice: return {!a.pinned(src, src_span), false};
    case cudaMemcpyDeviceToHost: return {false, !a.pinned(dst, dst_span)};
    case cudaMemcpyDeviceToDevice: return {};
    case cudaMemcpyHostToHost: return {false, true};
    default: {
      const bool src_device = a.on_device(src, src_span), dst_device = a.on_device(dst, dst_span);
      if (!src_device && !dst_device) return {false, true};
      return {!src_device && !a.pinned(src, src_span), !dst_device && !a.pinned(dst, dst_span)};
    }
  }
}

// A copy of `rows` rows of `width` bytes, `dpitch` and `spitch` apart, checked. Synchronous: run
// now, on the legacy default stream. Asynchronous: recorded for a graph while capturing; else
// left pending on `stream` (a pageable source staged now), or, to pageable memory, run now after
// the stream's earlier work.
cudaError_t copy(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows,
                 cudaMemcpyKind kind, cudaStream_t stream, bool async) {
  if (!async && e::capturing()) return e::refused_in_capture();
  if (width > dpitch || width > spitch) return e::fail(cudaErrorInvalidPitchValue);
  const bool empty = width == 0 || rows == 0;
  const std::size_t dst_span = empty ? 0 : dpitch * (rows - 1) + width;
  const std::size_t src_span = empty ? 0 : spitch * (rows - 1) + width;
  if (!empty && !e::copy_ok(dst, dst_span, src, src_span, kind)) return e::fail(cudaErrorInvalidValue);
  const auto run = [=](const void* from) {
    for (std::size_t r = 0; r < rows; ++r)
      std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(from) + r * spitch, width);
  };
  if (!async) {
    e::synchronize_legacy();
    run(src);
    return cudaSuccess;
  }
  const Pageable host = pageable(dst, dst_span, src, src_span, kind);
  if (e::capturing()) {
    // A captured copy to or from pageable host memory: a GPU refuses it (the graph could not run
    // it asynchronously).
    if (!empty && (host.src || host.dst)) return e::refused_in_capture();
    e::record([=] {
      e::count(e::Counted::copy);
      run(src);
    });
    return cudaSuccess;
  }
  e::count(e::Counted::copy);
  if (empty) return cudaSuccess;
  if (host.dst) {
    e::before_op(stream);
    run(src);
  } else if (host.src) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + src_span);
    e::defer(stream, [=] { run(staged->data()); });
  } else {
    e::defer(stream, [=] { run(src); });
  }
  return cudaSuccess;
}

cudaError_t set(void* p, int value, size_t n, cudaStream_t stream, bool async) {
  if (!async && e::capturing()) return e::refused_in_capture();
  if (n > 0 && !e::allocations().on_device(p, n)) return e::fail(cudaErrorInvalidValue);
  const auto run = [=] {
    if (n > 0) std::memset(p, value, n);
  };
  if (!async) {
    e::synchronize_legacy();
    run();
  } else if (e::capturing()) {
    e::record([=] {
      e::count(e::Counted::copy);
      run();
    });
  } else {
    e::count(e::Counted::copy);
    e::defer(stream, run);
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t stream) {
  return copy(dst, n, src, n, n, 1, kind, stream, true);
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  return copy(dst, dpitch, src, spitch, width, height, kind, nullptr, false);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  return copy(dst, dpitch, src, spitch, width, height, kind, stream, true);
}
cudaError_t cudaMemset(void* p, int value, size_t n) { return set(p, value, n, nullptr, false); }
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t stream) { return set(p, value, n, stream, true); }

cudaError_t cudaGetLastError() {
  const cudaError_t r = e::last_error;
  e::last_error = cudaSuccess;
  return r;
}
cudaError_t cudaPeekAtLastError() { return e::last_error; }
const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidPitchValue: return "cudaErrorInvalidPitchValue";
    default: return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (cuda_emu: a pointer or range outside the device's allocations?)";
    case cudaErrorMemoryAllocation: return "out of memory (cuda_emu: CUDA_EMU_MEMORY_MIB)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    default: return "unknown error";
  }
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void*, int block, size_t smem) {
  if (n == nullptr || block <= 0 || block > 1024) return e::fail(cudaErrorInvalidValue);
  int blocks = std::min(32, 2048 / block);
  if (smem > 0) blocks = std::min<int>(blocks, e::shared_per_sm / int(smem + 1024));  // 1 KiB reserved per block
  *n = std::max(blocks, 0);
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void* kernel, int block, size_t smem,
                                                                  unsigned int) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, kernel, block, smem);
}
cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;  // hints: nothing to emulate
  if (value < 0 || value > 227 * 1024) return e::fail(cudaErrorInvalidValue);
  std::lock_guard lock(e::attributes_mu);
  e::dynamic_limits[kernel] = std::size_t(value);
  return cudaSuccess;
}
