// The CUDA runtime API calls actorlm makes, over host memory (tools/cuda_emu): one device, the
// declarations of the toolkit's own cuda_runtime_api.h, no libcudart. Device memory is host
// memory that the emulator tracks, so a copy or memset that runs past a device allocation is an
// error here (cudaErrorInvalidValue), as the driver's checks and compute-sanitizer would make it.
// Work is synchronous: a stream or event has nothing left to wait for. CUDA_EMU_DEVICES devices
// (default 1) of CUDA_EMU_MEMORY_MIB (default 2,048) MiB each, so that a memory plan sized from
// cudaMemGetInfo stays small; an allocation counts against the device current when it was made.
#include "tools/cuda_emu/device.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>

struct CUstream_st {
  unsigned flags = 0;
};
struct CUevent_st {
  unsigned flags = 0;
};

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
  if (e::capturing()) return e::refused_in_capture();
  if (!e::copy_ok(dst, n, src, n, kind)) return e::fail(cudaErrorInvalidValue);
  if (n > 0) std::memmove(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t) {
  if (!e::copy_ok(dst, n, src, n, kind)) return e::fail(cudaErrorInvalidValue);
  // A captured copy to or from pageable host memory: a GPU refuses it (the graph could not run
  // it asynchronously).
  const bool pageable = (kind == cudaMemcpyHostToDevice && !e::allocations().pinned(src, n)) ||
                        (kind == cudaMemcpyDeviceToHost && !e::allocations().pinned(dst, n));
  if (e::capturing() && n > 0 && pageable) return e::refused_in_capture();
  const auto run = [=] {
    e::count(e::Counted::copy);
    if (n > 0) std::memmove(dst, src, n);
  };
  if (e::capturing()) e::record(run);
  else run();
  return cudaSuccess;
}
namespace {

// A 2-D copy checked, then run now or recorded for a graph (`async`).
cudaError_t copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                    cudaMemcpyKind kind, bool async) {
  if (!async && e::capturing()) return e::refused_in_capture();
  if (width > dpitch || width > spitch) return e::fail(cudaErrorInvalidPitchValue);
  if (height > 0 && width > 0 && !e::copy_ok(dst, dpitch * (height - 1) + width, src, spitch * (height - 1) + width, kind))
    return e::fail(cudaErrorInvalidValue);
  const auto run = [=] {
    if (async) e::count(e::Counted::copy);
    for (std::size_t r = 0; r < height; ++r)
      std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  };
  if (async && e::capturing()) e::record(run);
  else run();
  return cudaSuccess;
}

cudaError_t set(void* p, int value, size_t n, bool async) {
  if (!async && e::capturing()) return e::refused_in_capture();
  if (n > 0 && !e::allocations().on_device(p, n)) return e::fail(cudaErrorInvalidValue);
  const auto run = [=] {
    if (async) e::count(e::Counted::copy);
    if (n > 0) std::memset(p, value, n);
  };
  if (async && e::capturing()) e::record(run);
  else run();
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  return copy_2d(dst, dpitch, src, spitch, width, height, kind, false);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t) {
  return copy_2d(dst, dpitch, src, spitch, width, height, kind, true);
}
cudaError_t cudaMemset(void* p, int value, size_t n) { return set(p, value, n, false); }
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t) { return set(p, value, n, true); }

cudaError_t cudaDeviceSynchronize() { return e::capturing() ? e::refused_in_capture() : cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return e::capturing() ? e::refused_in_capture() : cudaSuccess; }
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  if (s == nullptr) return e::fail(cudaErrorInvalidValue);
  *s = new CUstream_st{flags};
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t* ev) { return cudaEventCreateWithFlags(ev, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* ev, unsigned int flags) {
  if (ev == nullptr) return e::fail(cudaErrorInvalidValue);
  *ev = new CUevent_st{flags};
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t) { return ev != nullptr ? cudaSuccess : e::fail(cudaErrorInvalidResourceHandle); }
cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
  if (e::capturing()) return e::refused_in_capture();
  return ev != nullptr ? cudaSuccess : e::fail(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  delete ev;
  return cudaSuccess;
}

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
