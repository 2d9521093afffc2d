// ProbeMoeBackend (kernels/cuda/moe/moe_gpu.h): whether a GPU backend can run
// on a device of this machine, and why not.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/backends/registry.h"
#include "kernels/cuda/base/cublas_api.h"
#include "kernels/cuda/base/device.cuh"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/moe_gpu.h"

namespace moetune::gpu {
namespace {

std::string SmName(int sm) { return "sm_" + std::to_string(sm); }

std::string Needs(const backends::GpuNeeds& needs) {
  return "needs sm_" + std::to_string(needs.min_sm) +
         (needs.arch_specific ? "a" : "+") + " (" + std::string(needs.feature) +
         ")";
}

// Whether this device has what `backend` needs, beyond being present.
BackendAvailability CheckNeeds(const backends::BackendDescriptor& backend,
                               int sm) {
  const backends::GpuNeeds& needs = backend.gpu;
  if (!needs.not_implemented.empty()) {
    return {false, Needs(needs) + ": build targets sm_" + BuiltArchs() +
                       " only and device is " + SmName(sm) + "; " +
                       std::string(needs.not_implemented)};
  }
  if (sm < needs.min_sm || (needs.arch_specific && sm != needs.min_sm)) {
    return {false, Needs(needs) + ", device is " + SmName(sm)};
  }
  const std::vector<int> archs = CompiledArchs();
  if (std::find(archs.begin(), archs.end(), sm) == archs.end()) {
    return {false,
            "built for sm_" + BuiltArchs() + " only, device is " + SmName(sm)};
  }
  return {true, ""};
}

// Whether a cuBLAS handle can be made (the backend's `reason` grows by it).
BackendAvailability CheckCublas(BackendAvailability result) {
  std::string error;
  const CublasApi* api = Cublas(&error);
  cublasHandle_t handle = nullptr;
  const cublasStatus_t s =
      api != nullptr ? api->create(&handle) : CUBLAS_STATUS_NOT_INITIALIZED;
  if (api == nullptr) return {false, "cuBLAS unavailable: " + error};
  if (s != CUBLAS_STATUS_SUCCESS) {
    return {false, std::string("cuBLAS unavailable: ") + api->status_name(s)};
  }
  api->destroy(handle);
  result.reason += "; cuBLAS handle created";
  return result;
}

// The kernels load on `ordinal`, and a cuBLAS handle can be made where the
// backend needs one.
BackendAvailability CheckLoads(const backends::BackendDescriptor& backend,
                               int ordinal, int sm) {
  int current = 0;
  cudaGetDevice(&current);
  cudaSetDevice(ordinal);
  BackendAvailability result{true, std::string(backend.name) +
                                       ": kernels for " + SmName(sm) + " load"};
  std::string why;
  if (!KernelImageLoads(&why)) {
    result = {false, why};
  } else if (backend.gpu.cublas) {
    result = CheckCublas(result);
  }
  cudaSetDevice(current);
  return result;
}

}  // namespace

BackendAvailability ProbeMoeBackend(const std::string& name, int ordinal) {
  const backends::BackendDescriptor* backend = backends::FindBackend(name);
  if (backend == nullptr) {
    return {false, "unknown backend '" + name +
                       "'; known: " + backends::KnownBackendNames()};
  }
  if (!backend->is_gpu()) {
    return {false,
            "'" + name + "' is a CPU backend; the GPU library does not run it"};
  }
  int sm = 0;
  std::string why;
  if (!UsableDevice(ordinal, &sm, &why)) return {false, why};
  const BackendAvailability needs = CheckNeeds(*backend, sm);
  if (!needs.available) return needs;
  if (FindLauncher(name) == nullptr) {
    return {false, "'" + name + "' is not built into this library"};
  }
  return CheckLoads(*backend, ordinal, sm);
}

}  // namespace moetune::gpu
