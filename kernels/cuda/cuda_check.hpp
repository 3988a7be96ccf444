#pragma once
// One macro checks every CUDA runtime result: on failure it throws with the call and its site.
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#define ACTORLM_CUDA_CHECK(call)                                                              \
  do {                                                                                        \
    const cudaError_t actorlm_err_ = (call);                                                  \
    if (actorlm_err_ != cudaSuccess)                                                          \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                               #call + ": " + cudaGetErrorString(actorlm_err_));              \
  } while (0)
