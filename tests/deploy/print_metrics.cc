// Prints one /metrics scrape of a CoordinatorMetrics fed a fake snapshot,
// trial observations, an RPC and this process's procfs numbers: every series
// the coordinator exposes, for `promtool check metrics`
// (tests/deploy/prometheus_test.py).
#include <iostream>

#include "coordinator/http/metrics.h"

namespace {

using moetune::coordinator::http::CoordinatorMetrics;
using moetune::coordinator::http::MetricsSnapshot;
using moetune::coordinator::http::MetricsSource;
using moetune::coordinator::http::WorkloadBest;

class FakeSource final : public MetricsSource {
 public:
  absl::StatusOr<MetricsSnapshot> Snapshot() override {
    MetricsSnapshot snapshot;
    snapshot.trials_by_state = {{"DONE", 5}, {"QUEUED", 2}, {"FAILED", 1}};
    snapshot.queue_depth = 2;
    snapshot.finished_total = 6;
    snapshot.finished_last_minute = 3;
    snapshot.workers_known = 2;
    snapshot.workers_alive = 1;
    WorkloadBest best;
    best.workload_hash = "abc";
    best.device = "NVIDIA H200";
    best.model_preset = "glm5";
    best.region = "MOE_LAYER";
    best.batch = 8;
    best.context = 2048;
    best.backend = "fused_gemv";
    best.median_seconds = 335e-6;
    best.efficiency = 0.75;
    snapshot.bests = {best};
    return snapshot;
  }
};

}  // namespace

int main() {
  FakeSource source;
  CoordinatorMetrics metrics;
  metrics.SetSource(&source);
  metrics.ObserveRpc("/moetune.v1.Moetune/GetSweep", "OK", 0.002);
  metrics.ObserveTrial("gpu-host:0", 12.5);
  const absl::StatusOr<std::string> text = metrics.Scrape();
  if (!text.ok()) {
    std::cerr << text.status() << "\n";
    return 1;
  }
  std::cout << *text;
  return 0;
}
