// Probing: what this worker really has (docs/design.md §3). The device, its
// measured bandwidth, versions, and every registered backend with
// available/reason. Pure function of its inputs; thread-compatible.
#pragma once

#include <string>

#include "common/clock.h"
#include "proto/moetune.pb.h"
#include "worker/backend.h"
#include "worker/gpu_api.h"
#include "worker/system_info.h"

namespace moetune::worker {

struct ProbeEnv {
  SystemInfo* system;
  GpuApi* gpu;
  const Clock* clock;
};

v1::Probe ProbeWorker(const DeviceTarget& target, BackendRegistry& registry,
                      const ProbeEnv& env);

// Hex digest over the identity fields (1-9) of a fingerprint.
std::string FingerprintHash(const v1::Fingerprint& fingerprint);

// Every backend of the registry (kernels/backends): the CPU ones over their
// MoE layers, the GPU ones as adapters over `gpu` (which says "built without
// CUDA" when that is the case).
BackendRegistry MakeDefaultRegistry(const Clock* clock, GpuApi* gpu);

// "13.0" from CUDA's 13000-style integers.
std::string CudaVersionString(int version);

}  // namespace moetune::worker
