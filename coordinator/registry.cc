#include "coordinator/registry.h"

namespace moetune::coordinator {

WorkerRegistry::WorkerRegistry(const Clock* clock, int64_t lease_ms)
    : clock_(clock), lease_ms_(lease_ms), started_ms_(clock->NowUnixMs()) {}

std::string WorkerRegistry::WorkerIdFor(const std::string& name) {
  return "w:" + name;
}

std::string WorkerRegistry::Register(const std::string& name,
                                     const v1::Probe& probe) {
  const std::string id = WorkerIdFor(name);
  absl::MutexLock lock(&mu_);
  WorkerEntry& entry = workers_[id];
  entry.worker_id = id;
  entry.name = name;
  entry.probe = probe;
  entry.last_heartbeat_ms = clock_->NowUnixMs();
  return id;
}

bool WorkerRegistry::Heartbeat(const std::string& worker_id,
                               int64_t current_trial_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return false;
  it->second.last_heartbeat_ms = clock_->NowUnixMs();
  it->second.current_trial_id = current_trial_id;
  return true;
}

std::optional<WorkerEntry> WorkerRegistry::Get(
    const std::string& worker_id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return std::nullopt;
  return it->second;
}

bool WorkerRegistry::IsAliveLocked(const WorkerEntry& entry) const {
  return clock_->NowUnixMs() - entry.last_heartbeat_ms <= lease_ms_;
}

bool WorkerRegistry::IsAlive(const std::string& worker_id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return clock_->NowUnixMs() - started_ms_ <= lease_ms_;
  }
  return IsAliveLocked(it->second);
}

std::vector<WorkerEntry> WorkerRegistry::AliveWorkers() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<WorkerEntry> alive;
  for (const auto& [id, entry] : workers_) {
    if (IsAliveLocked(entry)) alive.push_back(entry);
  }
  return alive;
}

}  // namespace moetune::coordinator
