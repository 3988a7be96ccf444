#include "kernels/cuda/model/device_buffer.hpp"

#include "kernels/cuda/cuda_check.hpp"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <utility>

namespace actorlm::kernels::cuda {

namespace {

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

DeviceBuffer::DeviceBuffer(std::size_t bytes, const std::string& what) { reserve(bytes, what); }

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reserve(std::size_t bytes, const std::string& what) {
  if (bytes <= bytes_) return;
  // Forget the old block before freeing it: a failed free (a sticky error) must not leave a
  // pointer that a later reserve hands out or the destructor frees again.
  bytes_ = 0;
  if (void* old = std::exchange(ptr_, nullptr)) ACTORLM_CUDA_CHECK(cudaFree(old));
  if (cudaMalloc(&ptr_, bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free allocation error
    std::size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    ptr_ = nullptr;
    throw std::runtime_error("cuda: out of device memory for " + what + ": " + mib(bytes) + " asked, " + mib(free) +
                             " free of " + mib(total));
  }
  bytes_ = bytes;
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) cudaFreeHost(ptr_);
}

void PinnedBuffer::reserve(std::size_t bytes, const std::string& what) {
  if (bytes <= bytes_) return;
  bytes_ = 0;  // as DeviceBuffer::reserve
  if (void* old = std::exchange(ptr_, nullptr)) ACTORLM_CUDA_CHECK(cudaFreeHost(old));
  if (cudaMallocHost(&ptr_, bytes) != cudaSuccess) {
    cudaGetLastError();
    ptr_ = nullptr;
    throw std::runtime_error("cuda: cannot pin " + mib(bytes) + " of host memory for " + what);
  }
  bytes_ = bytes;
}

}  // namespace actorlm::kernels::cuda
