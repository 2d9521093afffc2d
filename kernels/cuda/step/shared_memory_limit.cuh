// Raising a kernel's dynamic shared memory limit (past the 48 KB a launch
// gets without asking) once to the largest size asked for, not on every
// launch: the eager step launches each kernel once a layer. Host-only;
// shared by the step's kernels that size their shared memory at run time.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>

#include "kernels/cuda/base/cuda_util.cuh"

namespace moetune::gpu {

// Raises `kernel`'s limit to `smem` when it asks for more than *allowed,
// the kernel's own record (the attribute is the kernel's: one record per
// kernel, and per template instance).
template <typename Kernel>
GpuStatus AllowSharedMemory(Kernel kernel, size_t smem,
                            std::atomic<size_t>* allowed) {
  if (smem > allowed->load()) {
    MG_CUDA(cudaFuncSetAttribute(kernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem)));
    *allowed = smem;
  }
  return OkStatus();
}

}  // namespace moetune::gpu
