#include "coordinator/queries.h"

#include <map>
#include <set>

#include "common/status_macros.h"
#include "tuner/winner.h"

namespace moetune::coordinator {

absl::StatusOr<v1::GetBestResponse> AnswerGetBest(
    db::Store& store, const v1::GetBestRequest& request) {
  if (request.sweep_id() == 0 && request.workload_hash().empty()) {
    return absl::InvalidArgumentError(
        "sweep_id, workload_hash: one of them is required");
  }
  v1::TrialFilter filter;
  filter.set_sweep_id(request.sweep_id());
  filter.set_workload_hash(request.workload_hash());
  ASSIGN_OR_RETURN(const std::vector<v1::Trial> trials,
                   store.QueryTrials(filter));
  if (trials.empty()) {
    return absl::NotFoundError(
        request.sweep_id() != 0
            ? "sweep_id: no trials recorded for this sweep"
            : "workload_hash: no trials recorded for this workload");
  }
  // Incumbents: what the sweep had to beat (the bests accepted when earlier
  // sweeps of these workloads finished). A trial of this very query
  // competes as itself.
  std::set<int64_t> ids;
  std::set<std::string> hashes;
  for (const v1::Trial& trial : trials) {
    ids.insert(trial.trial_id());
    hashes.insert(trial.workload_hash());
  }
  std::vector<v1::Trial> incumbents;
  for (const std::string& hash : hashes) {
    ASSIGN_OR_RETURN(std::vector<v1::Trial> accepted,
                     store.Incumbents(hash, request.sweep_id()));
    for (v1::Trial& trial : accepted) {
      if (!ids.count(trial.trial_id())) incumbents.push_back(std::move(trial));
    }
  }
  v1::GetBestResponse response = tuner::SelectBest(trials, incumbents);
  for (v1::BestForWorkload& best : *response.mutable_workloads()) {
    best.set_decided_by(std::string(tuner::DecidedBy(best)));
  }
  std::map<std::string, std::string> excluded;  // backend -> reason
  for (const v1::Trial& trial : trials) {
    if (trial.state() == v1::UNAVAILABLE) {
      excluded.emplace(trial.config().moe_backend(), trial.reason());
    }
  }
  for (const auto& [backend, reason] : excluded) {
    v1::ExcludedBackend* entry = response.add_excluded();
    entry->set_backend(backend);
    entry->set_reason(reason);
  }
  return response;
}

absl::StatusOr<v1::ListWorkersResponse> AnswerListWorkers(db::Store& store,
                                                          int64_t now_ms,
                                                          int64_t lease_ms) {
  ASSIGN_OR_RETURN(std::vector<v1::WorkerInfo> workers, store.ListWorkers());
  v1::ListWorkersResponse response;
  for (v1::WorkerInfo& worker : workers) {
    worker.set_alive(now_ms - worker.last_heartbeat_unix_ms() <= lease_ms);
    *response.add_workers() = std::move(worker);
  }
  return response;
}

}  // namespace moetune::coordinator
