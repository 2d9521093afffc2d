// WorkerRegistry: the coordinator's in-memory view of its workers -- each
// registration's id, token digest, probe, last heartbeat and the trial its
// heartbeats say it runs -- with liveness judged against a lease on an
// injected Clock. Every registration gets a fresh id and token
// (identity.h); a call is honoured only with the token of its id. A
// restarted coordinator reloads the recent registrations from the database
// (Restore), so a worker mid-trial keeps its lease and its report counts.
// Thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "db/store.h"
#include "proto/moetune.pb.h"

namespace moetune::coordinator {

struct WorkerEntry {
  std::string worker_id;
  std::string name;
  std::string token_sha256;
  v1::Probe probe;
  int64_t last_heartbeat_ms = 0;
  // When this coordinator last heard a heartbeat from it (0: not yet, e.g.
  // restored after a restart), and the trial that heartbeat said it runs.
  int64_t last_heard_ms = 0;
  int64_t current_trial_id = 0;
};

// A new registration: its id and token (the token is shown once).
struct Registration {
  std::string worker_id;
  std::string token;
};

class WorkerRegistry {
 public:
  WorkerRegistry(const Clock* clock, int64_t lease_ms);

  // A fresh id and token for a worker called `name`.
  Registration Register(const std::string& name, const v1::Probe& probe);
  // Registrations a restarted coordinator still honours.
  void Restore(const std::vector<db::WorkerIdentity>& identities);
  // True when `token` is the token of registration `worker_id`.
  bool Authenticate(const std::string& worker_id,
                    const std::string& token) const;
  // Drops a registration (its worker registered again).
  void Forget(const std::string& worker_id);
  // Records a heartbeat; false when the id and token are not a registration
  // (the worker must register again).
  bool Heartbeat(const std::string& worker_id, const std::string& token,
                 int64_t current_trial_id);
  std::optional<WorkerEntry> Get(const std::string& worker_id) const;
  // A worker is alive while its last heartbeat is within the lease. Unknown
  // workers count as alive for one lease after the coordinator started: they
  // may be mid-trial and about to call in.
  bool IsAlive(const std::string& worker_id) const;
  std::vector<WorkerEntry> AliveWorkers() const;
  // The ids of every registration of a worker called `name`, alive or not.
  std::vector<std::string> IdsNamed(const std::string& name) const;
  int64_t lease_ms() const { return lease_ms_; }
  int64_t started_ms() const { return started_ms_; }

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
