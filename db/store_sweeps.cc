// Store: sweeps, their trials at creation, their state and cancellation.
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

absl::StatusOr<int64_t> Store::CreateSweep(const v1::SweepSpec& spec,
                                           std::vector<v1::Trial>* trials,
                                           int64_t now_ms) {
  RETURN_IF_ERROR(CheckTrialsToInsert(trials));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  RETURN_IF_ERROR(conn_.Execute(
      "INSERT INTO sweeps (name, spec, state, created_at) VALUES (?, ?, ?, ?)",
      spec.name(), BlobRef{SerializeMessage(spec)},
      static_cast<int>(v1::RUNNING), now_ms));
  const int64_t sweep_id = conn_.LastInsertRowId();
  ASSIGN_OR_RETURN(const std::vector<int64_t> ids,
                   InsertTrials(conn_, sweep_id, spec, *trials, now_ms));
  RETURN_IF_ERROR(txn.Commit());
  MarkInserted(sweep_id, spec, ids, now_ms, trials);
  return sweep_id;
}

absl::Status Store::AddTrials(int64_t sweep_id, std::vector<v1::Trial>* trials,
                              int64_t now_ms) {
  RETURN_IF_ERROR(CheckTrialsToInsert(trials));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps,
                   SelectSweeps(conn_, "WHERE id = ?", sweep_id));
  if (sweeps.empty()) {
    return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " not found"));
  }
  if (sweeps.front().state() != v1::RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep_id, " is not RUNNING"));
  }
  const v1::SweepSpec& spec = sweeps.front().spec();
  ASSIGN_OR_RETURN(const std::vector<int64_t> ids,
                   InsertTrials(conn_, sweep_id, spec, *trials, now_ms));
  RETURN_IF_ERROR(txn.Commit());
  MarkInserted(sweep_id, spec, ids, now_ms, trials);
  return absl::OkStatus();
}

absl::StatusOr<v1::Sweep> Store::GetSweep(int64_t sweep_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps,
                   SelectSweeps(conn_, "WHERE id = ?", sweep_id));
  if (sweeps.empty()) {
    return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " not found"));
  }
  return std::move(sweeps.front());
}

absl::StatusOr<std::vector<v1::Sweep>> Store::ListSweeps(int limit) {
  RETURN_IF_ERROR(CheckLimit(limit, "limit"));
  absl::MutexLock lock(&mu_);
  // LIMIT -1 is SQLite's "no limit".
  return SelectSweeps(conn_, "ORDER BY id DESC LIMIT ?",
                      limit > 0 ? limit : -1);
}

absl::Status Store::SetSweepState(int64_t sweep_id, v1::SweepState state,
                                  int64_t now_ms) {
  if (!v1::SweepState_IsValid(state) || state == v1::SWEEP_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("state is ", static_cast<int>(state),
                     "; allowed: RUNNING, FINISHED, ABORTED"));
  }
  const int64_t finished_at = state == v1::RUNNING ? 0 : now_ms;
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  RETURN_IF_ERROR(conn_.Execute(
      "UPDATE sweeps SET state = ?, finished_at = NULLIF(?, 0) WHERE id = ?",
      static_cast<int>(state), finished_at, sweep_id));
  if (conn_.Changes() == 0) {
    return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " not found"));
  }
  return txn.Commit();
}

absl::Status Store::CancelSweep(int64_t sweep_id, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  ASSIGN_OR_RETURN(Statement stmt,
                   conn_.Prepare("SELECT state FROM sweeps WHERE id = ?"));
  RETURN_IF_ERROR(stmt.BindAll(sweep_id));
  ASSIGN_OR_RETURN(const bool found, stmt.Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " not found"));
  }
  const auto state = static_cast<SweepState>(stmt.Int64(0));
  stmt.Reset();  // finished with it before writing
  if (state == v1::ABORTED) return absl::OkStatus();  // already cancelled
  if (state == v1::FINISHED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sweep ", sweep_id, " is FINISHED: there is nothing to cancel"));
  }
  RETURN_IF_ERROR(
      conn_.Execute("UPDATE trials SET state = ?, reason = 'sweep cancelled', "
                    "updated_at = ? WHERE sweep_id = ? AND state = ?",
                    static_cast<int>(v1::CANCELLED), now_ms, sweep_id,
                    static_cast<int>(v1::QUEUED)));
  RETURN_IF_ERROR(
      conn_.Execute("UPDATE sweeps SET state = ?, finished_at = ? WHERE id = ?",
                    static_cast<int>(v1::ABORTED), now_ms, sweep_id));
  return txn.Commit();
}

}  // namespace moetune::db
