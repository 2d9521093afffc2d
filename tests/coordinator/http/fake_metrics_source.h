// Test support: a MetricsSource that hands out a snapshot the test fills,
// and a best of one H200 workload, for the metrics tests and the /metrics
// rendering promtool checks (tests/deploy/print_metrics.cc).
#pragma once

#include <string>

#include "coordinator/http/metrics_source.h"

namespace moetune::coordinator::http::testing {

class FakeMetricsSource final : public MetricsSource {
 public:
  absl::StatusOr<MetricsSnapshot> Snapshot() override { return snapshot; }
  MetricsSnapshot snapshot;
};

// The best of glm5's MOE_LAYER at batch 8, context 2048 on an H200.
inline WorkloadBest H200Best(const std::string& backend, double median_s) {
  WorkloadBest best;
  best.workload_hash = "abc";
  best.device = "NVIDIA H200";
  best.model_preset = "glm5";
  best.region = "MOE_LAYER";
  best.batch = 8;
  best.context = 2048;
  best.backend = backend;
  best.median_seconds = median_s;
  best.efficiency = 0.75;
  return best;
}

}  // namespace moetune::coordinator::http::testing
