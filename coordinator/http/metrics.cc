#include "coordinator/http/metrics.h"

#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "prometheus/text_serializer.h"

namespace moetune::coordinator::http {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// 100 us to ~13 s in factors of ~3: a GetBest over a large sweep and a
// trivial GetSweep both land in a bucket of their own.
const prometheus::Histogram::BucketBoundaries& RpcBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10};
  return *buckets;
}

// A trial's wall time: from a sub-second CPU check to the 120 s default
// timeout and beyond (a whole decode step with many iterations).
const prometheus::Histogram::BucketBoundaries& TrialBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.1, 0.3, 1, 3, 10, 30, 60, 120, 300, 600, 1800};
  return *buckets;
}

// A gauge without labels.
prometheus::Gauge& PlainGauge(prometheus::Registry& registry,
                              const std::string& name,
                              const std::string& help) {
  return BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

constexpr const char* kFinalStates[] = {"DONE",        "FAILED",    "INCORRECT",
                                        "UNAVAILABLE", "CANCELLED", "TIMEOUT"};
constexpr const char* kAllStates[] = {"QUEUED",    "LEASED",    "DONE",
                                      "FAILED",    "INCORRECT", "UNAVAILABLE",
                                      "CANCELLED", "TIMEOUT"};

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(
    std::unique_ptr<ProcessStatsSource> process)
    : registry_(std::make_shared<prometheus::Registry>()),
      trials_(BuildGauge()
                  .Name("moetune_trials")
                  .Help("Trials in the database by state")
                  .Register(*registry_)),
      queue_depth_(BuildGauge()
                       .Name("moetune_queue_depth")
                       .Help("Trials waiting for a worker (QUEUED)")
                       .Register(*registry_)
                       .Add({})),
      workers_(BuildGauge()
                   .Name("moetune_workers")
                   .Help("Workers that ever registered")
                   .Register(*registry_)
                   .Add({})),
      workers_alive_(
          BuildGauge()
              .Name("moetune_workers_alive")
              .Help("Workers whose last heartbeat is within the lease")
              .Register(*registry_)
              .Add({})),
      finished_total_(BuildCounter()
                          .Name("moetune_trials_finished_total")
                          .Help("Trials that reached a final state")
                          .Register(*registry_)
                          .Add({})),
      trials_per_second_(
          BuildGauge()
              .Name("moetune_trials_per_second")
              .Help("Trials that reached a final state in the last 60 s, / 60")
              .Register(*registry_)
              .Add({})),
      rpc_duration_(BuildHistogram()
                        .Name("moetune_rpc_duration_seconds")
                        .Help("Unary gRPC calls handled, by method and code")
                        .Register(*registry_)),
      best_median_(BuildGauge()
                       .Name("moetune_best_median_seconds")
                       .Help("Median step time of the latest sweep's winner "
                             "per workload and fingerprint")
                       .Register(*registry_)),
      best_efficiency_(BuildGauge()
                           .Name("moetune_best_efficiency_ratio")
                           .Help("Roofline floor / median of that winner")
                           .Register(*registry_)),
      trial_duration_(
          BuildHistogram()
              .Name("moetune_trial_duration_seconds")
              .Help("Wall time of each trial whose result a worker reported")
              .Register(*registry_)
              .Add({}, TrialBuckets())),
      worker_busy_(BuildCounter()
                       .Name("moetune_worker_busy_seconds_total")
                       .Help("Wall time of the trials a worker reported, by "
                             "worker name")
                       .Register(*registry_)),
      process_start_(PlainGauge(*registry_, "process_start_time_seconds",
                                "Start time of the process since the Unix "
                                "epoch in seconds")),
      process_resident_(PlainGauge(*registry_, "process_resident_memory_bytes",
                                   "Resident memory size in bytes")),
      process_fds_(PlainGauge(*registry_, "process_open_fds",
                              "Number of open file descriptors")),
      process_(std::move(process)) {
  BuildGauge()
      .Name("moetune_build_info")
      .Help("1, labelled with the coordinator's version and commit")
      .Register(*registry_)
      .Add({{"version", Version()}, {"commit", BuildHash()}})
      .Set(1);
  // Every state is present from the start, so a query for one is never
  // empty just because nothing reached it yet.
  for (const char* state : kAllStates) trials_.Add({{"state", state}});
}

void CoordinatorMetrics::SetSource(MetricsSource* source) {
  absl::MutexLock lock(&mu_);
  source_ = source;
}

void CoordinatorMetrics::ObserveRpc(absl::string_view full_method,
                                    absl::string_view code, double seconds) {
  absl::string_view service = full_method;
  absl::string_view method;
  service.remove_prefix(service.empty() || service.front() != '/' ? 0 : 1);
  if (const size_t slash = service.find('/'); slash != service.npos) {
    method = service.substr(slash + 1);
    service = service.substr(0, slash);
  }
  rpc_duration_
      .Add({{"service", std::string(service)},
            {"method", std::string(method)},
            {"code", std::string(code)}},
           RpcBuckets())
      .Observe(seconds);
}

void CoordinatorMetrics::ObserveTrial(const std::string& worker,
                                      double wall_s) {
  if (wall_s < 0) return;
  trial_duration_.Observe(wall_s);
  worker_busy_.Add({{"worker", worker}}).Increment(wall_s);
}

absl::StatusOr<std::string> CoordinatorMetrics::Scrape() {
  absl::MutexLock lock(&mu_);
  ApplyProcess();
  if (source_ != nullptr) {
    absl::StatusOr<MetricsSnapshot> snapshot = source_->Snapshot();
    if (!snapshot.ok()) return snapshot.status();
    Apply(*snapshot);
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

// An unreadable procfs (a sandbox that hides it) keeps the last values: the
// coordinator's own series matter more than these.
void CoordinatorMetrics::ApplyProcess() {
  if (process_ == nullptr) return;
  const absl::StatusOr<ProcessStats> stats = process_->Read();
  if (!stats.ok()) return;
  process_start_.Set(stats->start_time_seconds);
  process_resident_.Set(stats->resident_memory_bytes);
  process_fds_.Set(stats->open_fds);
}

void CoordinatorMetrics::Apply(const MetricsSnapshot& snapshot) {
  for (const char* state : kAllStates) {
    const auto it = snapshot.trials_by_state.find(state);
    trials_.Add({{"state", state}})
        .Set(it == snapshot.trials_by_state.end() ? 0 : it->second);
  }
  queue_depth_.Set(snapshot.queue_depth);
  workers_.Set(snapshot.workers_known);
  workers_alive_.Set(snapshot.workers_alive);
  // A counter only goes up: add what finished since the last scrape.
  const double finished = static_cast<double>(snapshot.finished_total);
  if (finished > finished_seen_) {
    finished_total_.Increment(finished - finished_seen_);
    finished_seen_ = finished;
  }
  trials_per_second_.Set(snapshot.finished_last_minute / 60.0);
  ApplyBests(snapshot.bests);
}

void CoordinatorMetrics::ApplyBests(const std::vector<WorkloadBest>& bests) {
  for (prometheus::Gauge* series : best_series_) {
    // Each series was added to exactly one of the two families.
    best_median_.Remove(series);
    best_efficiency_.Remove(series);
  }
  best_series_.clear();
  for (const WorkloadBest& best : bests) {
    const prometheus::Labels labels = {{"workload_hash", best.workload_hash},
                                       {"model_preset", best.model_preset},
                                       {"region", best.region},
                                       {"batch", absl::StrCat(best.batch)},
                                       {"context", absl::StrCat(best.context)},
                                       {"device", best.device},
                                       {"backend", best.backend}};
    prometheus::Gauge& median = best_median_.Add(labels);
    median.Set(best.median_seconds);
    prometheus::Gauge& efficiency = best_efficiency_.Add(labels);
    efficiency.Set(best.efficiency);
    best_series_.push_back(&median);
    best_series_.push_back(&efficiency);
  }
}

}  // namespace moetune::coordinator::http
