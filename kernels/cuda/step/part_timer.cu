#include <algorithm>

#include "kernels/cuda/step/part_timer.cuh"

namespace moetune::gpu {

PartTimer::~PartTimer() {
  for (const Mark& m : marks_) cudaEventDestroy(m.event);
}

GpuStatus PartTimer::PartBegins(const char* part, cudaStream_t stream) {
  cudaEvent_t e;
  MG_CUDA(cudaEventCreate(&e));
  marks_.push_back({part, stream, e});
  MG_CUDA(cudaEventRecord(e, stream));
  return OkStatus();
}

GpuStatus PartTimer::Totals(
    std::vector<std::pair<std::string, double>>* out) const {
  out->clear();
  for (size_t i = 0; i < marks_.size(); ++i) {
    const Mark& m = marks_[i];
    if (EndsOnly(m.part)) continue;
    auto next =
        std::find_if(marks_.begin() + i + 1, marks_.end(),
                     [&](const Mark& n) { return n.stream == m.stream; });
    if (next == marks_.end()) continue;  // ends nothing it began
    float ms = 0;
    MG_CUDA(cudaEventElapsedTime(&ms, m.event, next->event));
    auto it = std::find_if(out->begin(), out->end(),
                           [&](const auto& e) { return e.first == m.part; });
    if (it == out->end()) it = out->insert(out->end(), {m.part, 0.0});
    it->second += 1000.0 * ms;
  }
  return OkStatus();
}

}  // namespace moetune::gpu
