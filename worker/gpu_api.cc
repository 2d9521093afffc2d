#include "worker/gpu_api.h"

namespace moetune::worker {

bool RealGpuApi::BuiltWithCuda() { return gpu::BuiltWithCuda(); }

}  // namespace moetune::worker
