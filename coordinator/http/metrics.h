// CoordinatorMetrics: the coordinator's Prometheus metrics (prometheus-cpp's
// registry and text format), served at GET /metrics. Names follow
// Prometheus conventions (moetune_ prefix, base units, _total counters):
//   moetune_trials{state}                  trials by state (gauge)
//   moetune_queue_depth                    QUEUED trials (gauge)
//   moetune_workers / moetune_workers_alive
//   moetune_trials_finished_total          trials that reached a final state
//   moetune_trials_per_second              finished over the last minute / 60
//   moetune_rpc_duration_seconds{service,method,code}  unary RPC latency
//   moetune_trial_duration_seconds         reported trials' wall time
//   (histogram) moetune_worker_busy_seconds_total{worker}  wall time of its
//   reported trials
//   moetune_best_median_seconds{workload_hash,model_preset,region,batch,
//       context,device,backend}            newest winner per workload, device
//   moetune_best_efficiency_ratio{...}     its floor / median
//   moetune_build_info{version,commit}     1
//   process_start_time_seconds, process_resident_memory_bytes,
//   process_open_fds                       the coordinator process
// Thread-safe: ObserveRpc and ObserveTrial from any gRPC thread, Scrape from
// HTTP threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/http/metrics_source.h"
#include "coordinator/http/process_stats.h"
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
  // `process` reads the process series at each scrape (procfs by default).
  explicit CoordinatorMetrics(std::unique_ptr<ProcessStatsSource> process =
                                  std::make_unique<ProcfsProcessStats>());
  void SetSource(MetricsSource* source);

  // `full_method` as gRPC names it: "/moetune.v1.Moetune/GetSweep".
  void ObserveRpc(absl::string_view full_method, absl::string_view code,
                  double seconds);
  // A trial whose result `worker` (its name) reported, `wall_s` long.
  void ObserveTrial(const std::string& worker, double wall_s);
  // Refreshes the gauges from the source, then the text exposition format.
  absl::StatusOr<std::string> Scrape();

 private:
  void Apply(const MetricsSnapshot& snapshot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyBests(const std::vector<WorkloadBest>& bests)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyProcess() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

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
  prometheus::Histogram& trial_duration_;
  prometheus::Family<prometheus::Counter>& worker_busy_;
  prometheus::Gauge& process_start_;
  prometheus::Gauge& process_resident_;
  prometheus::Gauge& process_fds_;

  absl::Mutex mu_;
  MetricsSource* source_ ABSL_GUARDED_BY(mu_) = nullptr;
  const std::unique_ptr<ProcessStatsSource> process_;
  double finished_seen_ ABSL_GUARDED_BY(mu_) = 0;
  // The best-per-workload series of the last scrape: a workload whose
  // winner changed must not keep its old series.
  std::vector<prometheus::Gauge*> best_series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace moetune::coordinator::http
