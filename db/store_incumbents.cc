// Store: the accepted best of each (workload, fingerprint), with history.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "db/codec.h"
#include "db/store.h"
#include "db/sweep_rows.h"
#include "db/trial_rows.h"

namespace moetune::db {

using v1::SweepState;
using v1::TrialState;

absl::Status Store::SetIncumbent(const std::string& workload_hash,
                                 const std::string& fingerprint_hash,
                                 int64_t trial_id, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  RETURN_IF_ERROR(conn_.Execute(
      "INSERT INTO incumbents (workload_hash, fingerprint_hash, trial_id, "
      "accepted_at) VALUES (?, ?, ?, ?)",
      workload_hash, fingerprint_hash, trial_id, now_ms));
  return txn.Commit();
}

absl::StatusOr<std::vector<v1::Trial>> Store::Incumbents(
    const std::string& workload_hash, int64_t before_sweep_id) {
  const int64_t bound = before_sweep_id > 0
                            ? before_sweep_id
                            : std::numeric_limits<int64_t>::max();
  absl::MutexLock lock(&mu_);
  // Per fingerprint, the latest acceptance of a trial from an earlier sweep.
  return SelectTrials(
      conn_,
      {"t.id IN (SELECT i.trial_id FROM incumbents AS i WHERE i.id IN ("
       "SELECT MAX(i2.id) FROM incumbents AS i2 JOIN trials AS t2 "
       "ON t2.id = i2.trial_id WHERE i2.workload_hash = ? AND t2.sweep_id < ? "
       "GROUP BY i2.fingerprint_hash))"},
      {workload_hash, bound}, 0);
}

}  // namespace moetune::db
