#include "kernels/cuda/step/side_stream.cuh"

namespace moetune::gpu {

SideStream::~SideStream() {
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (join_ != nullptr) cudaEventDestroy(join_);
  if (side_ != nullptr) cudaStreamDestroy(side_);
}

GpuStatus SideStream::Init() {
  if (side_ != nullptr) return OkStatus();
  MG_CUDA(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  MG_CUDA(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  MG_CUDA(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  return OkStatus();
}

GpuStatus SideStream::Fork(cudaStream_t main) {
  MG_CUDA(cudaEventRecord(fork_, main));
  MG_CUDA(cudaStreamWaitEvent(side_, fork_, 0));
  return OkStatus();
}

GpuStatus SideStream::Join(cudaStream_t main) {
  MG_CUDA(cudaEventRecord(join_, side_));
  MG_CUDA(cudaStreamWaitEvent(main, join_, 0));
  return OkStatus();
}

}  // namespace moetune::gpu
