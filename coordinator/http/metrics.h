// CoordinatorMetrics: the coordinator's Prometheus metrics (prometheus-cpp's
// registry and text format), served at GET /metrics. Names follow
// Prometheus conventions (moetune_ prefix, base units, _total counters):
//   moetune_trials{state}                  trials by state (gauge)
//   moetune_queue_depth                    QUEUED trials (gauge)
//   moetune_workers / moetune_workers_alive
//   moetune_trials_finished_total          trials that reached a final state
//   moetune_trials_per_second              finished over the last minute / 60
//   moetune_rpc_duration_seconds{service,method,code}  unary RPC latency
//   moetune_best_median_seconds{workload_hash,fingerprint,model_preset,
//       region,batch,context,backend}      latest sweep's winner per workload
//   moetune_best_efficiency_ratio{...}     its floor / median
// Thread-safe: ObserveRpc from any gRPC thread, Scrape from HTTP threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/http/metrics_source.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace moetune::coordinator::http {

class CoordinatorMetrics {
 public:
  // `source` may be set later (the RPC histogram is needed before the store
  // is); until then a scrape reports the RPC latencies only.
  CoordinatorMetrics();
  void SetSource(MetricsSource* source);

  // `full_method` as gRPC names it: "/moetune.v1.Moetune/GetSweep".
  void ObserveRpc(absl::string_view full_method, absl::string_view code,
                  double seconds);
  // Refreshes the gauges from the source, then the text exposition format.
  absl::StatusOr<std::string> Scrape();

 private:
  void Apply(const MetricsSnapshot& snapshot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyBests(const std::vector<WorkloadBest>& bests)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& trials_;
  prometheus::Gauge& queue_depth_;
  prometheus::Gauge& workers_;
  prometheus::Gauge& workers_alive_;
  prometheus::Counter& finished_total_;
  prometheus::Gauge& trials_per_second_;
  prometheus::Family<prometheus::Histogram>& rpc_duration_;
  prometheus::Family<prometheus::Gauge>& best_median_;
  prometheus::Family<prometheus::Gauge>& best_efficiency_;

  absl::Mutex mu_;
  MetricsSource* source_ ABSL_GUARDED_BY(mu_) = nullptr;
  double finished_seen_ ABSL_GUARDED_BY(mu_) = 0;
  // The best-per-workload series of the last scrape: a workload whose
  // winner changed must not keep its old series.
  std::vector<prometheus::Gauge*> best_series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace moetune::coordinator::http
