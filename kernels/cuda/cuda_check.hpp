#pragma once
// One macro checks every CUDA runtime result: on failure it throws with the call and its site.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#define ACTORLM_CUDA_CHECK(call)                                                              \
  do {                                                                                        \
    const cudaError_t actorlm_err_ = (call);                                                  \
    if (actorlm_err_ != cudaSuccess)                                                          \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                               #call + ": " + cudaGetErrorString(actorlm_err_));              \
  } while (0)

namespace actorlm::kernels::cuda {

// Synchronises `stream` and adds the time it waited to `waited_ns`: what a shard subtracts from a
// step's wall time to get its host-side time (StepResult::host_ns).
inline void timed_sync(cudaStream_t stream, std::int64_t& waited_ns) {
  const auto start = std::chrono::steady_clock::now();
  ACTORLM_CUDA_CHECK(cudaStreamSynchronize(stream));
  waited_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace actorlm::kernels::cuda
