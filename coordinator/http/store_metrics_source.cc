#include "coordinator/http/store_metrics_source.h"

#include <set>
#include <utility>

#include "common/status_macros.h"
#include "coordinator/queries.h"

namespace moetune::coordinator::http {
namespace {

constexpr int64_t kMinuteMs = 60'000;

bool IsFinal(const std::string& state) {
  return state != "QUEUED" && state != "LEASED";
}

WorkloadBest BestOf(const v1::BestForWorkload& entry) {
  const v1::Workload& workload = entry.workload();
  WorkloadBest best;
  best.workload_hash = entry.workload_hash();
  best.device = entry.fingerprint().device_name();
  best.model_preset = workload.model_preset();
  best.region =
      workload.region() == v1::MOE_LAYER ? "MOE_LAYER" : "DECODE_STEP";
  best.batch = workload.batch_size();
  best.context = workload.context_length();
  best.backend = entry.best().config().moe_backend();
  best.median_seconds = entry.best().result().stats().median_us() * 1e-6;
  best.efficiency = entry.best().result().roofline().efficiency();
  return best;
}

}  // namespace

absl::StatusOr<MetricsSnapshot> StoreMetricsSource::Snapshot() {
  const int64_t now_ms = clock_->NowUnixMs();
  MetricsSnapshot snapshot;
  RETURN_IF_ERROR(AddTrialCounts(now_ms, &snapshot));
  ASSIGN_OR_RETURN(const v1::ListWorkersResponse workers,
                   AnswerListWorkers(*store_, now_ms, lease_ms_));
  snapshot.workers_known = workers.workers_size();
  for (const v1::WorkerInfo& worker : workers.workers()) {
    snapshot.workers_alive += worker.alive() ? 1 : 0;
  }
  RETURN_IF_ERROR(AddBests(&snapshot));
  return snapshot;
}

// Counts from every sweep's per-state totals; the last minute's finishes
// from the sweeps that can have any (running, or finished within it).
absl::Status StoreMetricsSource::AddTrialCounts(int64_t now_ms,
                                                MetricsSnapshot* snapshot) {
  ASSIGN_OR_RETURN(const std::vector<v1::Sweep> sweeps, store_->ListSweeps(0));
  for (const v1::Sweep& sweep : sweeps) {
    for (const auto& [state, count] : sweep.trial_counts()) {
      snapshot->trials_by_state[state] += count;
      if (IsFinal(state)) snapshot->finished_total += count;
    }
    if (sweep.state() == v1::RUNNING ||
        sweep.finished_at_unix_ms() >= now_ms - kMinuteMs) {
      ASSIGN_OR_RETURN(
          const std::vector<v1::Trial> recent,
          store_->FinalTrialsSince(sweep.sweep_id(), now_ms - kMinuteMs));
      snapshot->finished_last_minute += static_cast<int64_t>(recent.size());
    }
  }
  snapshot->queue_depth = snapshot->trials_by_state["QUEUED"];
  return absl::OkStatus();
}

absl::Status StoreMetricsSource::AddBests(MetricsSnapshot* snapshot) {
  ASSIGN_OR_RETURN(const std::vector<v1::Sweep> sweeps,
                   store_->ListSweeps(best_sweeps_));
  // One winner per workload and device name: fingerprints that differ only
  // in driver or build (a new night's build) stay one series, the newest.
  std::set<std::pair<std::string, std::string>> seen;  // workload, device
  for (const v1::Sweep& sweep : sweeps) {              // newest first
    const auto done = sweep.trial_counts().find("DONE");
    if (done == sweep.trial_counts().end() || done->second == 0) continue;
    v1::GetBestRequest request;
    request.set_sweep_id(sweep.sweep_id());
    absl::StatusOr<v1::GetBestResponse> answer =
        AnswerGetBest(*store_, request);
    if (absl::IsNotFound(answer.status())) continue;
    if (!answer.ok()) return answer.status();
    for (const v1::BestForWorkload& entry : answer->workloads()) {
      if (!entry.has_best()) continue;
      if (!seen.emplace(entry.workload_hash(),
                        entry.fingerprint().device_name())
               .second) {
        continue;
      }
      snapshot->bests.push_back(BestOf(entry));
    }
  }
  return absl::OkStatus();
}

}  // namespace moetune::coordinator::http
