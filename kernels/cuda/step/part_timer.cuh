// PartTimer: the time of each part of one step, observed (StepObserver) on
// the schedule the step runs: an event recorded where each part begins, on
// the stream the part runs on. A part lasts from its event to the next event
// on its stream, so the side stream's parts overlap the step's. The events
// stand between kernels of a stream, so a kernel after one does not overlap
// the kernel before it: the parts' times include each part's ramp. Not
// thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/step/step_launch.cuh"

namespace moetune::gpu {

class PartTimer final : public StepObserver {
 public:
  PartTimer() = default;
  ~PartTimer() override;
  PartTimer(const PartTimer&) = delete;
  PartTimer& operator=(const PartTimer&) = delete;

  GpuStatus PartBegins(const char* part, cudaStream_t stream) override;
  // ("part/kernel", microseconds summed over its occurrences), in order of
  // first appearance; after the streams have finished.
  GpuStatus Totals(std::vector<std::pair<std::string, double>>* out) const;

 private:
  struct Mark {
    std::string part;
    cudaStream_t stream;
    cudaEvent_t event;
  };
  std::vector<Mark> marks_;
};

}  // namespace moetune::gpu
