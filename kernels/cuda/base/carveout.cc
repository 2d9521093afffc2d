#include "kernels/cuda/base/carveout.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace moetune::gpu {
namespace {

using Shape = std::tuple<int, const void*, int64_t, int, size_t>;

// The device's SMs, largest shared memory an SM and shared memory the
// system reserves a block; false where the runtime cannot say.
bool DeviceLimits(int device, int* sms, int* most, int* reserved) {
  return cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device) ==
             cudaSuccess &&
         cudaDeviceGetAttribute(most,
                                cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                device) == cudaSuccess &&
         cudaDeviceGetAttribute(reserved,
                                cudaDevAttrReservedSharedMemoryPerBlock,
                                device) == cudaSuccess &&
         *sms > 0 && *most > 0;
}

// FittedCarveout's percent, not remembered.
int CarveoutOf(int device, const void* kernel, int64_t blocks, int threads,
               size_t smem) {
  int sms = 0, most = 0, reserved = 0, occupancy = 0;
  cudaFuncAttributes attributes = {};
  if (!DeviceLimits(device, &sms, &most, &reserved) ||
      cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, kernel, threads,
                                                    smem) != cudaSuccess) {
    return -1;
  }
  const int64_t per_sm =
      std::clamp<int64_t>((blocks + sms - 1) / sms, 1, std::max(occupancy, 1));
  const int64_t needed =
      per_sm * static_cast<int64_t>(smem + attributes.sharedSizeBytes +
                                    static_cast<size_t>(reserved));
  return static_cast<int>(
      std::min<int64_t>(100, (100 * needed + most - 1) / most));
}

}  // namespace

int FittedCarveout(const void* kernel, int64_t blocks, int threads,
                   size_t smem) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return -1;
  thread_local std::map<Shape, int> known;
  const Shape shape{device, kernel, blocks, threads, smem};
  const auto it = known.find(shape);
  if (it != known.end()) return it->second;
  const int percent = CarveoutOf(device, kernel, blocks, threads, smem);
  known.emplace(shape, percent);
  return percent;
}

}  // namespace moetune::gpu
