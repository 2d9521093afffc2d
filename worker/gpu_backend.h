// The worker's side of a GPU backend: a thin adapter over GpuApi that times
// the MOE_LAYER region (or a chain of them), or the rank's whole
// DECODE_STEP with its MoE layers on this backend. Whether one is available
// is the GPU library's probe of the device, never the registry's list.
#pragma once

#include <memory>
#include <string>

#include "worker/backend.h"
#include "worker/gpu_api.h"

namespace moetune::worker {

std::unique_ptr<Backend> MakeGpuBackend(
    const backends::BackendDescriptor& descriptor, GpuApi* gpu);

// Maps a GPU run's status to the absl code the Backend contract names.
absl::Status GpuRunStatus(gpu::RunStatus status, const std::string& message);

}  // namespace moetune::worker
