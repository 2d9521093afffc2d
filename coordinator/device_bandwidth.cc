#include "coordinator/device_bandwidth.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/roofline.h"

namespace moetune::coordinator {

std::string DeviceKind(const v1::Fingerprint& fp) {
  return absl::StrCat(fp.device_name(), "|", fp.sm_arch(), "|", fp.sm_count(),
                      "|", fp.sm_clock_mhz(), "|", fp.mem_clock_mhz());
}

double FloorReadGbps(const v1::Roofline& r) {
  if (r.read_gbps() > 0) return r.read_gbps();
  const double memory_us = r.floor_us() - r.comm_floor_us();
  return r.bytes() > 0 && memory_us > 0 ? r.bytes() / (memory_us * 1e3) : 0;
}

void RefloorAt(double gbps, v1::TrialResult* result) {
  v1::Roofline& r = *result->mutable_roofline();
  const double used = FloorReadGbps(r);
  if (used <= 0) return;  // nothing timed, or no bytes to move
  // A relative margin: the worker's own probe comes back through here too.
  if (gbps <= used * (1 + 1e-9)) {
    r.set_read_gbps(used);
    return;
  }
  r.set_read_gbps(gbps);
  r.set_floor_us(r.bytes() / (gbps * 1e3) + r.comm_floor_us());
  r.set_efficiency(RooflineEfficiency(r, result->stats().median_us()));
}

void DeviceBandwidths::Note(const v1::Probe& probe) {
  const double gbps = probe.device().measured_read_gbps();
  if (!(gbps > 0)) return;
  absl::MutexLock lock(&mu_);
  double& best = best_[DeviceKind(probe.fingerprint())];
  best = std::max(best, gbps);
}

double DeviceBandwidths::Best(const v1::Fingerprint& fingerprint) const {
  absl::MutexLock lock(&mu_);
  const auto it = best_.find(DeviceKind(fingerprint));
  return it == best_.end() ? 0 : it->second;
}

}  // namespace moetune::coordinator
