#pragma once
// Owned device memory (cudaMalloc) and pinned host memory (cudaMallocHost), freed on destruction,
// for the cuda model forward. A failed allocation throws std::runtime_error naming what was asked
// for, how much, and what the device has free.

#include <cstddef>
#include <string>

namespace actorlm::kernels::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `what` names the buffer in an out-of-memory error ("KV cache", "layer 3 wqkv").
  DeviceBuffer(std::size_t bytes, const std::string& what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // At least `bytes`, reallocated (contents lost) only when it must grow.
  void reserve(std::size_t bytes, const std::string& what);
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void reserve(std::size_t bytes, const std::string& what);
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace actorlm::kernels::cuda
