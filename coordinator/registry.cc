#include "coordinator/registry.h"

#include "coordinator/identity.h"

namespace moetune::coordinator {

WorkerRegistry::WorkerRegistry(const Clock* clock, int64_t lease_ms)
    : clock_(clock), lease_ms_(lease_ms), started_ms_(clock->NowUnixMs()) {}

Registration WorkerRegistry::Register(const std::string& name,
                                      const v1::Probe& probe) {
  Registration registration{NewWorkerId(name), NewToken()};
  absl::MutexLock lock(&mu_);
  WorkerEntry& entry = workers_[registration.worker_id];
  entry.worker_id = registration.worker_id;
  entry.name = name;
  entry.token_sha256 = TokenDigest(registration.token);
  entry.probe = probe;
  entry.last_heartbeat_ms = clock_->NowUnixMs();
  return registration;
}

void WorkerRegistry::Restore(
    const std::vector<db::WorkerIdentity>& identities) {
  absl::MutexLock lock(&mu_);
  for (const db::WorkerIdentity& identity : identities) {
    if (identity.token_sha256.empty()) continue;  // no token: must re-register
    WorkerEntry& entry = workers_[identity.worker_id];
    entry.worker_id = identity.worker_id;
    entry.name = identity.name;
    entry.token_sha256 = identity.token_sha256;
    entry.probe = identity.probe;
    // Alive for one lease from now: it may be mid-trial, reconnecting.
    entry.last_heartbeat_ms = started_ms_;
  }
}

bool WorkerRegistry::Authenticate(const std::string& worker_id,
                                  const std::string& token) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  return it != workers_.end() &&
         SameDigest(it->second.token_sha256, TokenDigest(token));
}

void WorkerRegistry::Forget(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  workers_.erase(worker_id);
}

bool WorkerRegistry::Heartbeat(const std::string& worker_id,
                               const std::string& token,
                               int64_t current_trial_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() ||
      !SameDigest(it->second.token_sha256, TokenDigest(token))) {
    return false;
  }
  it->second.last_heartbeat_ms = clock_->NowUnixMs();
  it->second.last_heard_ms = it->second.last_heartbeat_ms;
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

std::vector<std::string> WorkerRegistry::IdsNamed(
    const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [id, entry] : workers_) {
    if (entry.name == name) ids.push_back(id);
  }
  return ids;
}

}  // namespace moetune::coordinator
