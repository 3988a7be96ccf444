// Stream capture and CUDA graphs on the host emulation (tools/cuda_emu): between
// cudaStreamBeginCapture and cudaStreamEndCapture, the stream operations the capturing thread
// issues (kernel launches, asynchronous copies and memsets, cuBLAS GEMMs, NCCL all-reduces) are
// checked and recorded instead of run; cudaGraphLaunch runs them in order, as often as it is
// called. What a GPU refuses during a capture (a synchronisation, a synchronous copy or memset,
// an allocation or a free) fails and breaks the capture: cudaStreamEndCapture then reports
// cudaErrorStreamCaptureInvalidated, as the driver does. One capture per thread at a time (the
// thread-local mode is what the emulation models); an operation recorded from another thread is
// not, as no other thread issues work on the capturing shard's stream.
#include "tools/cuda_emu/host.hpp"

#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

struct CUgraph_st {
  std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> ops;
};

namespace cuda_emu {

namespace {
thread_local CUgraph_st* capture = nullptr;
thread_local bool capture_broken = false;
}  // namespace

bool capturing() { return capture != nullptr; }

void record(std::function<void()> op) {
  if (capture == nullptr) throw std::logic_error("cuda_emu: record() outside a capture");
  capture->ops.push_back(std::move(op));
}

cudaError_t refused_in_capture() {
  capture_broken = true;
  set_last_error(cudaErrorStreamCaptureUnsupported);
  return cudaErrorStreamCaptureUnsupported;
}

}  // namespace cuda_emu

namespace e = cuda_emu;

cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  if (e::capture != nullptr) {
    e::set_last_error(cudaErrorIllegalState);
    return cudaErrorIllegalState;
  }
  e::capture = new CUgraph_st;
  e::capture_broken = false;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
  if (e::capture == nullptr || graph == nullptr) {
    e::set_last_error(cudaErrorIllegalState);
    return cudaErrorIllegalState;
  }
  CUgraph_st* g = std::exchange(e::capture, nullptr);
  if (e::capture_broken) {
    delete g;
    *graph = nullptr;
    e::set_last_error(cudaErrorStreamCaptureInvalidated);
    return cudaErrorStreamCaptureInvalidated;
  }
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return cudaErrorInvalidValue;
  *status = e::capture != nullptr ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  if (e::capturing()) return e::refused_in_capture();  // a graph inside a capture: not emulated
  e::before_op(stream);
  e::count(e::Counted::graph_launch);
  for (const auto& op : exec->ops) {
    op();
    e::count(e::Counted::replayed);
  }
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
