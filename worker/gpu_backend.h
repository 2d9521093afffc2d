// The GPU MoE backends (dequant_cublas, fused_gemv, fused_gemv_fp8,
// grouped_mma, native_fp4) as seen by the worker: thin adapters over GpuApi.
// Whether one is available is the GPU library's probe, never this list.
#pragma once

#include <memory>
#include <string>

#include "worker/backend.h"
#include "worker/gpu_api.h"

namespace moetune::worker {

std::unique_ptr<Backend> MakeGpuBackend(const std::string& name, GpuApi* gpu);

// Maps a GPU run's status to the absl code the Backend contract names.
absl::Status GpuRunStatus(const gpu::MoeRunResult& result);

}  // namespace moetune::worker
