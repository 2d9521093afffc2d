#include <string>

#include "kernels/cuda/base/cuda_util.cuh"

namespace moetune::gpu {

GpuStatus CudaFailure(cudaError_t error, const char* call, const char* file,
                      int line) {
  std::string message = std::string(cudaGetErrorName(error)) + " (" +
                        cudaGetErrorString(error) + ") from " + call + " at " +
                        file + ":" + std::to_string(line);
  return Fail(RunStatus::kCudaError, std::move(message));
}

int CurrentDeviceSmCount() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) !=
          cudaSuccess) {
    return 0;
  }
  return count;
}

GpuStatus DeviceBuffer::Allocate(size_t bytes) {
  Reset();
  if (bytes < 256) bytes = 256;
  MG_CUDA(cudaMalloc(&ptr_, bytes));
  bytes_ = bytes;
  MG_CUDA(cudaMemset(ptr_, 0, bytes));
  // The memset runs on the legacy stream, which does not order itself with
  // the non-blocking streams the kernels use: finish it before they start.
  MG_CUDA(cudaDeviceSynchronize());
  return OkStatus();
}

void DeviceBuffer::Reset() {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace moetune::gpu
