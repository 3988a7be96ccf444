// Streams and events on the host emulation (tools/cuda_emu), as late as CUDA's ordering allows.
// Kernels, GEMMs, all-reduces and graph launches run when issued (first what their stream has
// pending); asynchronous copies and memsets are left pending on their stream until something
// orders them: the stream's next operation, cudaStreamSynchronize, cudaEventSynchronize or
// cudaStreamWaitEvent on an event recorded after them, cudaDeviceSynchronize, a free, or the
// legacy default stream (stream 0, and the synchronous copies and memsets) for a stream created
// without cudaStreamNonBlocking. So work on one stream that reads what another stream's copy
// writes without waiting for it sees the old bytes, as it may on a GPU; and cudaEventQuery says
// cudaErrorNotReady while an event's copies are pending. Events are not emulated inside a
// capture: recording or waiting on one there is refused.
#include "tools/cuda_emu/host.hpp"

#include <deque>
#include <mutex>
#include <set>
#include <utility>

struct CUstream_st {
  unsigned flags = 0;
  int device = 0;
  std::mutex mu;
  std::deque<std::function<void()>> pending;  // deferred, oldest first
  std::uint64_t deferred = 0;                 // operations ever deferred; the last pending.size() have not run
};
struct CUevent_st {
  unsigned flags = 0;
  CUstream_st* stream = nullptr;  // where last recorded (null: never, or where nothing was pending)
  std::uint64_t at = 0;           // complete once the stream has run this many deferred operations
};

namespace cuda_emu {

namespace {

std::mutex registry_mu;  // taken before a stream's own mutex
std::set<CUstream_st*> live_streams;

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

// What the current device's streams have pending (only those the legacy default stream waits
// for, with `blocking_only`).
void run_device(bool blocking_only) {
  std::lock_guard lock(registry_mu);
  for (CUstream_st* s : live_streams)
    if (s->device == current_device() && (!blocking_only || (s->flags & cudaStreamNonBlocking) == 0))
      run_until(s, UINT64_MAX);
}

// The event's operations: run them (`run`), or say whether they have.
bool event_done(cudaEvent_t ev, bool run) {
  std::lock_guard lock(registry_mu);
  if (ev->stream == nullptr || live_streams.count(ev->stream) == 0) return true;
  if (run) run_until(ev->stream, ev->at);
  std::lock_guard stream_lock(ev->stream->mu);
  return ran(ev->stream) >= ev->at;
}

cudaError_t fail(cudaError_t err) {
  set_last_error(err);
  return err;
}

}  // namespace

void before_op(cudaStream_t s) {
  if (s == nullptr) run_device(true);
  else run_until(s, UINT64_MAX);
}

void defer(cudaStream_t s, std::function<void()> op) {
  if (s == nullptr) {
    run_device(true);
    op();
    return;
  }
  std::lock_guard lock(s->mu);
  s->pending.push_back(std::move(op));
  ++s->deferred;
}

void synchronize_device() { run_device(false); }
void synchronize_legacy() { run_device(true); }

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
  e::live_streams.insert(stream);
  *s = stream;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return e::fail(cudaErrorInvalidResourceHandle);
  std::lock_guard lock(e::registry_mu);
  e::run_until(s, UINT64_MAX);  // a GPU finishes the stream's work before releasing it
  e::live_streams.erase(s);
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
    ev->stream = nullptr;
    return cudaSuccess;
  }
  std::lock_guard lock(s->mu);
  ev->stream = s;
  ev->at = s->deferred;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t ev, unsigned int) {
  if (ev == nullptr) return e::fail(cudaErrorInvalidResourceHandle);
  if (e::capturing()) return e::refused_in_capture();
  // The waiting stream's later operations run when issued: the event's run now, before them.
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
  return e::event_done(ev, false) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  delete ev;
  return cudaSuccess;
}
