// Error values and RAII device memory for the CUDA side of moetune. Every
// CUDA call is checked and turned into a GpuStatus (never an abort): the
// worker runs a trial in a child process, but even there a failed call must
// come back as kCudaError with the call named. Not thread-safe per object.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "kernels/cuda/base/device.h"

namespace moetune::gpu {

struct GpuStatus {
  RunStatus code = RunStatus::kOk;
  std::string message;
  bool ok() const { return code == RunStatus::kOk; }
};

inline GpuStatus OkStatus() { return {}; }
inline GpuStatus Fail(RunStatus code, std::string message) {
  return {code, std::move(message)};
}
GpuStatus CudaFailure(cudaError_t error, const char* call, const char* file,
                      int line);

#define MG_CUDA(expr)                                                \
  do {                                                               \
    const cudaError_t mg_error_ = (expr);                            \
    if (mg_error_ != cudaSuccess) {                                  \
      return ::moetune::gpu::CudaFailure(mg_error_, #expr, __FILE__, \
                                         __LINE__);                  \
    }                                                                \
  } while (0)

// After every kernel launch: launch-configuration errors surface here.
#define MG_CHECK_LAUNCH() MG_CUDA(cudaGetLastError())

#define MG_RETURN_IF_ERROR(expr)                   \
  do {                                             \
    ::moetune::gpu::GpuStatus mg_status_ = (expr); \
    if (!mg_status_.ok()) return mg_status_;       \
  } while (0)

// One cudaMalloc'd region; freed on destruction (errors there are ignored:
// a sticky error has already been reported by the call that caused it).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    Reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    return *this;
  }

  // Allocates `bytes` (at least 256) and zero-fills them.
  GpuStatus Allocate(size_t bytes);
  void Reset();
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Rounds up to a multiple of 256 bytes (carving one allocation into parts).
inline size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The current device's SM count, for kernels that size their grids to it
// (0 when it cannot be read; the launch then reports the device's fault).
int CurrentDeviceSmCount();

// Carves consecutive 256-byte-aligned parts out of one allocation.
class Carver {
 public:
  // A null base only sizes: Take returns nullptr and counts the bytes.
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* Take(size_t count) {
    T* p = base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + used_);
    used_ += Align256(count * sizeof(T));
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// atom.add with release and acquire semantics at GPU scope: publishes the
// caller's (and, after a barrier, its warp's or block's) earlier writes and
// sees those published by earlier releases on the same counter.
__device__ __forceinline__ int AtomicAddAcqRelGpu(int* p, int v) {
  int old;
  asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], %2;\n"
               : "=r"(old)
               : "l"(p), "r"(v)
               : "memory");
  return old;
}

}  // namespace moetune::gpu
