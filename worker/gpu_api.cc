#include "worker/gpu_api.h"

namespace moetune::worker {

bool RealGpuApi::BuiltWithCuda() {
#ifdef MOETUNE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace moetune::worker
