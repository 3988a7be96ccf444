// Streams and events on the host emulation (tools/cuda_emu), as late as CUDA's ordering allows.
// Kernels, GEMMs, all-reduces and graph launches run when issued (first what their stream has
// pending); asynchronous copies and memsets are left pending on their stream until something
// orders them: the stream's next operation, cudaStreamSynchronize, cudaEventSynchronize or
// cudaStreamWaitEvent on an event recorded after them, cudaDeviceSynchronize, a free, or the
// legacy default stream (stream 0, and the synchronous copies and memsets) for a stream created
// without cudaStreamNonBlocking. So work on one stream that reads what another stream's copy
// writes without waiting for it sees the old bytes, as it may on a GPU; and cudaEventQuery says
// cudaErrorNotReady while an event's copies are pending (and then runs them, as a GPU would get
// there). Less strict than a GPU: kernels run when issued, so a copy that should wait for a
// kernel on another stream cannot be caught reading too early; cudaStreamWaitEvent runs the
// event's copies at the call rather than when the waiting stream next runs; synchronous copies
// and memsets are done when they return; a free runs every device's streams. Events are not
// emulated inside a capture: recording or waiting on one while the thread captures is refused
// (CUDA allows both, to fork and join captured streams, and on streams not being captured).
#include "tools/cuda_emu/host.hpp"

#include <deque>
#include <map>
#include <mutex>
#include <utility>

struct CUstream_st {
  unsigned flags = 0;
  int device = 0;
  std::uint64_t serial = 0;  // never reused, unlike the address
  std::mutex mu;
  std::deque<std::function<void()>> pending;  // deferred, oldest first
  std::uint64_t deferred = 0;                 // operations ever deferred; the last pending.size() have not run
};
struct CUevent_st {  // its fields under the registry's mutex
  unsigned flags = 0;
  std::uint64_t stream = 0;  // the serial of the stream where last recorded (0: never, or on stream 0)
  std::uint64_t at = 0;      // complete once that stream has run this many deferred operations
};

namespace cuda_emu {

namespace {

std::mutex registry_mu;  // taken before a stream's own mutex
std::map<std::uint64_t, CUstream_st*> live_streams;  // by serial
std::uint64_t next_serial = 1;

std::uint64_t ran(const CUstream_st* s) { return s->deferred - s->pending.size(); }

// Runs s's pending operations until it has run `upto` of those ever deferred on it.
void run_until(CUstream_st* s, std::uint64_t upto) {
  std::lock_guard lock(s->mu);
  while (!s->pending.empty() && ran(s) < upto) {
    auto op = std::move(s->pending.front());
    s->pending.pop_front();
    op();
  }
}

// What streams have pending: those of the current device (`all_devices`: every stream), only
// those the legacy default stream waits for with `blocking_only`.
void run_streams(bool blocking_only, bool all_devices = false) {
  std::lock_guard lock(registry_mu);
  for (auto& [serial, s] : live_streams)
    if ((all_devices || s->device == current_device()) &&
        (!blocking_only || (s->flags & cudaStreamNonBlocking) == 0))
      run_until(s, UINT64_MAX);
}

// Whether the event's operations have run; with `run`, they run first.
bool event_done(cudaEvent_t ev, bool run) {
  std::lock_guard lock(registry_mu);
  const auto it = live_streams.find(ev->stream);
  if (it == live_streams.end()) return true;  // never recorded, or its stream finished and went
  if (run) run_until(it->second, ev->at);
  std::lock_guard stream_lock(it->second->mu);
  return ran(it->second) >= ev->at;
}

cudaError_t fail(cudaError_t err) {
  set_last_error(err);
  return err;
}

}  // namespace

void before_op(cudaStream_t s) {
  if (s == nullptr) run_streams(true);
  else run_until(s, UINT64_MAX);
}

void defer(cudaStream_t s, std::function<void()> op) {
  if (s == nullptr) {
    run_streams(true);
    op();
    return;
  }
  std::lock_guard lock(s->mu);
  s->pending.push_back(std::move(op));
  ++s->deferred;
}

void synchronize_device() { run_streams(false); }
void synchronize_legacy() { run_streams(true); }
// A free: whatever device the memory is on, no pending copy may write into it afterwards.
void synchronize_all() { run_streams(false, true); }

}  // namespace cuda_emu

namespace e = cuda_emu;

cudaError_t cudaDeviceSynchronize() {
  if (e::capturing()) return e::refused_in_capture();
  e::synchronize_device();
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (e::capturing()) return e::refused_in_capture();
  e::before_op(s);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  if (s == nullptr) return e::fail(cudaErrorInvalidValue);
  auto* stream = new CUstream_st;
  stream->flags = flags;
  stream->device = e::current_device();
  std::lock_guard lock(e::registry_mu);
  stream->serial = e::next_serial++;
  e::live_streams[stream->serial] = stream;
  *s = stream;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return e::fail(cudaErrorInvalidResourceHandle);
  std::lock_guard lock(e::registry_mu);
  e::run_until(s, UINT64_MAX);  // a GPU finishes the stream's work before releasing it
  e::live_streams.erase(s->serial);
  delete s;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* ev) { return cudaEventCreateWithFlags(ev, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* ev, unsigned int flags) {
  if (ev == nullptr) return e::fail(cudaErrorInvalidValue);
  *ev = new CUevent_st{flags};
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) {
  if (ev == nullptr) return e::fail(cudaErrorInvalidResourceHandle);
  if (e::capturing()) return e::refused_in_capture();
  if (s == nullptr) {
    e::synchronize_legacy();
    std::lock_guard lock(e::registry_mu);
    ev->stream = 0;
    return cudaSuccess;
  }
  std::lock_guard lock(e::registry_mu);
  std::lock_guard stream_lock(s->mu);
  ev->stream = s->serial;
  ev->at = s->deferred;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t ev, unsigned int) {
  if (ev == nullptr) return e::fail(cudaErrorInvalidResourceHandle);
  if (e::capturing()) return e::refused_in_capture();
  // The waiting stream's later operations run when issued: the event's run now, before them
  // (earlier than a GPU might run them: the emulation is less strict here).
  e::event_done(ev, true);
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
  if (ev == nullptr) return e::fail(cudaErrorInvalidResourceHandle);
  if (e::capturing()) return e::refused_in_capture();
  e::event_done(ev, true);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t ev) {
  if (ev == nullptr) return e::fail(cudaErrorInvalidResourceHandle);
  if (e::event_done(ev, false)) return cudaSuccess;
  e::event_done(ev, true);  // not ready now; a GPU gets there, and so must a loop that polls
  return cudaErrorNotReady;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  if (ev == nullptr) return e::fail(cudaErrorInvalidResourceHandle);
  delete ev;
  return cudaSuccess;
}
