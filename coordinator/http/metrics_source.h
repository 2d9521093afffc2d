// What one Prometheus scrape reports about the coordinator, as plain values,
// and the interface that gathers it (the store-backed one is
// StoreMetricsSource; tests use a fake). Separates what is measured from
// how it is exposed (metrics.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace moetune::coordinator::http {

// The newest sweep's winner for one workload on one kind of device.
struct WorkloadBest {
  std::string workload_hash;
  std::string device;  // Fingerprint.device_name, e.g. "NVIDIA H200"
  std::string model_preset;
  std::string region;   // DECODE_STEP or MOE_LAYER
  int batch = 0;        // tokens per step
  int context = 0;      // tokens in the KV cache
  std::string backend;  // the winner's
  double median_seconds = 0;
  double efficiency = 0;  // floor / median, 0..1
};

struct MetricsSnapshot {
  std::map<std::string, int64_t> trials_by_state;  // TrialState name -> count
  int64_t queue_depth = 0;                         // QUEUED trials
  int64_t finished_total = 0;        // trials in a final state, ever
  int64_t finished_last_minute = 0;  // of those, updated in the last 60 s
  int64_t workers_known = 0;
  int64_t workers_alive = 0;  // heartbeat within the lease
  std::vector<WorkloadBest> bests;
};

class MetricsSource {
 public:
  virtual ~MetricsSource() = default;
  virtual absl::StatusOr<MetricsSnapshot> Snapshot() = 0;
};

}  // namespace moetune::coordinator::http
