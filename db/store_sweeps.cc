// Store: sweeps, their trials at creation, their state and cancellation.
#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "db/codec.h"
#include "db/paging.h"
#include "db/store.h"
#include "db/sweep_rows.h"
#include "db/trial_rows.h"

namespace moetune::db {

using v1::SweepState;
using v1::TrialState;

absl::StatusOr<int64_t> Store::CreateSweep(const v1::SweepSpec& spec,
                                           std::vector<v1::Trial>* trials,
                                           int64_t now_ms,
                                           const std::string& request_id) {
  RETURN_IF_ERROR(CheckTrialsToInsert(trials));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  const absl::Status inserted = conn_.Execute(
      "INSERT INTO sweeps (name, spec, state, created_at, request_id) "
      "VALUES (?, ?, ?, ?, NULLIF(?, ''))",
      spec.name(), BlobRef{SerializeMessage(spec)},
      static_cast<int>(v1::RUNNING), now_ms, request_id);
  if (!inserted.ok() && absl::StrContains(inserted.message(), "UNIQUE")) {
    return absl::AlreadyExistsError(
        absl::StrCat("request_id: '", request_id, "' already created a sweep"));
  }
  RETURN_IF_ERROR(inserted);
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
  if (state == v1::FINISHED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sweep ", sweep_id, " is FINISHED: there is nothing to cancel"));
  }
  RETURN_IF_ERROR(
      conn_.Execute("UPDATE trials SET state = ?, reason = 'sweep cancelled', "
                    "updated_at = ? WHERE sweep_id = ? AND state = ?",
                    static_cast<int>(v1::CANCELLED), now_ms, sweep_id,
                    static_cast<int>(v1::QUEUED)));
  // Already cancelled: the sweep keeps its finish time, but a trial still
  // queued in it (a lease lost after the cancel, re-queued) is closed here.
  if (state == v1::ABORTED) return txn.Commit();
  RETURN_IF_ERROR(
      conn_.Execute("UPDATE sweeps SET state = ?, finished_at = ? WHERE id = ?",
                    static_cast<int>(v1::ABORTED), now_ms, sweep_id));
  return txn.Commit();
}

absl::StatusOr<std::optional<int64_t>> Store::SweepForRequest(
    const std::string& request_id) {
  if (request_id.empty()) return std::optional<int64_t>();
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement stmt,
                   conn_.Prepare("SELECT id FROM sweeps WHERE request_id = ?"));
  RETURN_IF_ERROR(stmt.BindAll(request_id));
  ASSIGN_OR_RETURN(const bool found, stmt.Step());
  if (!found) return std::optional<int64_t>();
  return std::optional<int64_t>(stmt.Int64(0));
}

absl::StatusOr<SweepPage> Store::ListSweepPage(int limit, int page_size,
                                               const std::string& page_token) {
  RETURN_IF_ERROR(CheckLimit(limit, "limit"));
  ASSIGN_OR_RETURN(const int size, PageSize(page_size, kDefaultSweepPage,
                                            kMaxSweepPage, "page_size"));
  ASSIGN_OR_RETURN(const PageCursor cursor,
                   ParsePageToken(page_token, 's', "page_token", limit));
  const int64_t take =
      cursor.remaining > 0 ? std::min<int64_t>(size, cursor.remaining) : size;
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      std::vector<v1::Sweep> sweeps,
      SelectSweeps(
          conn_, absl::StrCat("WHERE id < ? ORDER BY id DESC LIMIT ", take + 1),
          cursor.after > 0 ? cursor.after
                           : std::numeric_limits<int64_t>::max()));
  SweepPage page;
  const bool more = static_cast<int64_t>(sweeps.size()) > take;
  if (more) sweeps.pop_back();
  if (more && !(cursor.remaining > 0 && cursor.remaining <= take)) {
    page.next_page_token =
        PageToken('s', sweeps.back().sweep_id(),
                  cursor.remaining > 0 ? cursor.remaining - take : 0);
  }
  page.sweeps = std::move(sweeps);
  return page;
}

}  // namespace moetune::db
