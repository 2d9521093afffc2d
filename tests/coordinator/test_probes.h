// Probes the coordinator tests register workers with.
#pragma once

#include "proto/moetune.pb.h"

namespace moetune::coordinator {

// A CPU worker: both CPU backends available, fused_gemv not built.
inline v1::Probe CpuWorkerProbe() {
  v1::Probe probe;
  probe.mutable_fingerprint()->set_hash("fp");
  probe.mutable_fingerprint()->set_device_name("test cpu");
  probe.mutable_device()->set_measured_read_gbps(10);
  for (const char* name : {"cpu_reference", "cpu_blocked"}) {
    v1::BackendProbe* b = probe.add_backends();
    b->set_name(name);
    b->set_available(true);
  }
  v1::BackendProbe* gpu = probe.add_backends();
  gpu->set_name("fused_gemv");
  gpu->set_reason("built without CUDA");
  return probe;
}

}  // namespace moetune::coordinator
