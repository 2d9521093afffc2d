// A second stream for step work that does not depend on the kernels beside
// it (at batch 1 the indexer's top-k runs on one SM for ~14 us; W_UK's
// absorption of the query needs only the query and can run beside it).
// Fork() makes the side stream wait for what `main` has queued so far;
// Join() makes `main` wait for what the side stream has. Captured in a CUDA
// graph, the two become branches of the graph. Not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"

namespace moetune::gpu {

class SideStream {
 public:
  SideStream() = default;
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  // The stream and its two events (once).
  GpuStatus Init();
  GpuStatus Fork(cudaStream_t main);
  GpuStatus Join(cudaStream_t main);
  cudaStream_t stream() const { return side_; }

 private:
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

}  // namespace moetune::gpu
