// WorkerRegistry: the coordinator's in-memory view of live workers — probe,
// last heartbeat, current trial — with liveness judged against a lease on
// an injected Clock. Worker ids are derived from the worker's name
// (host:device), so a worker that re-registers after a coordinator restart
// keeps its id and the trials leased to it. Thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "proto/moetune.pb.h"

namespace moetune::coordinator {

struct WorkerEntry {
  std::string worker_id;
  std::string name;
  v1::Probe probe;
  int64_t last_heartbeat_ms = 0;
  int64_t current_trial_id = 0;
};

class WorkerRegistry {
 public:
  WorkerRegistry(const Clock* clock, int64_t lease_ms);

  static std::string WorkerIdFor(const std::string& name);
  // Adds or refreshes a worker; returns its id.
  std::string Register(const std::string& name, const v1::Probe& probe);
  // False when the worker is unknown (it must register again).
  bool Heartbeat(const std::string& worker_id, int64_t current_trial_id);
  std::optional<WorkerEntry> Get(const std::string& worker_id) const;
  // A worker is alive while its last heartbeat is within the lease. Unknown
  // workers count as alive for one lease after the coordinator started: they
  // may be mid-trial and about to re-register.
  bool IsAlive(const std::string& worker_id) const;
  std::vector<WorkerEntry> AliveWorkers() const;
  int64_t lease_ms() const { return lease_ms_; }

 private:
  bool IsAliveLocked(const WorkerEntry& entry) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Clock* clock_;
  const int64_t lease_ms_;
  const int64_t started_ms_;
  mutable absl::Mutex mu_;
  std::map<std::string, WorkerEntry> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace moetune::coordinator
