// The roofline floor at the best read bandwidth recorded for the kind of
// device a result came from. A worker measures its bandwidth once, when it
// starts; started beside a busy job it reads low, its floors come out high
// and its efficiencies flattering (a night that runs 35% slower can show its
// efficiency rising). The idle figure is the highest
// one measured on that kind of device, so the coordinator keeps the best
// probe per kind and records every result's floor against it.
// Thread-safe.
#pragma once

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/moetune.pb.h"

namespace moetune::coordinator {

// Name, architecture, SMs and clocks: what makes two devices the same kind
// (driver, CUDA, NCCL and build do not change the memory's bandwidth).
std::string DeviceKind(const v1::Fingerprint& fingerprint);

// The bandwidth (GB/s) a roofline's memory floor was computed with; 0 when
// it cannot be told (no bytes, no memory part).
double FloorReadGbps(const v1::Roofline& roofline);

// Recomputes floor_us and efficiency at `gbps` when that is above the
// bandwidth the floor used; sets read_gbps to the bandwidth used in the end.
void RefloorAt(double gbps, v1::TrialResult* result);

class DeviceBandwidths {
 public:
  void Note(const v1::Probe& probe);
  // The best bandwidth noted for the fingerprint's kind of device; 0 if none.
  double Best(const v1::Fingerprint& fingerprint) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, double> best_ ABSL_GUARDED_BY(mu_);
};

}  // namespace moetune::coordinator
