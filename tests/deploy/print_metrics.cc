// Prints one /metrics scrape of a CoordinatorMetrics fed a fake snapshot,
// trial observations, an RPC and this process's procfs numbers: every series
// the coordinator exposes, for `promtool check metrics`
// (tests/deploy/prometheus_test.py).
#include <iostream>

#include "coordinator/http/metrics.h"
#include "tests/coordinator/http/fake_metrics_source.h"

namespace {

using moetune::coordinator::http::CoordinatorMetrics;
using moetune::coordinator::http::testing::FakeMetricsSource;
using moetune::coordinator::http::testing::H200Best;

}  // namespace

int main() {
  FakeMetricsSource source;
  source.snapshot.trials_by_state = {{"DONE", 5}, {"QUEUED", 2}, {"FAILED", 1}};
  source.snapshot.queue_depth = 2;
  source.snapshot.finished_total = 6;
  source.snapshot.finished_last_minute = 3;
  source.snapshot.workers_known = 2;
  source.snapshot.workers_alive = 1;
  source.snapshot.bests = {H200Best("fused_gemv", 335e-6)};
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
