// Store: the workers table and the probes each registration appends.
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

namespace {

absl::Status AppendProbeRows(Connection& conn, const std::string& worker_id,
                             const v1::Probe& probe, int64_t now_ms) {
  ASSIGN_OR_RETURN(Statement next,
                   conn.Prepare("SELECT COALESCE(MAX(probe_no), 0) + 1 "
                                "FROM probes WHERE worker_id = ?"));
  RETURN_IF_ERROR(next.BindAll(worker_id));
  RETURN_IF_ERROR(next.Step().status());
  const int64_t probe_no = next.Int64(0);
  next.Reset();
  const int64_t probed_at =
      probe.probed_at_unix_ms() != 0 ? probe.probed_at_unix_ms() : now_ms;
  ASSIGN_OR_RETURN(
      Statement insert,
      conn.Prepare("INSERT INTO probes (worker_id, probe_no, backend, "
                   "available, reason, probed_at, backend_probe) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)"));
  for (const v1::BackendProbe& backend : probe.backends()) {
    insert.Reset();
    RETURN_IF_ERROR(insert.BindAll(
        worker_id, probe_no, backend.name(), backend.available(),
        backend.reason(), probed_at, BlobRef{SerializeMessage(backend)}));
    RETURN_IF_ERROR(insert.Run());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Store::UpsertWorker(const std::string& worker_id,
                                 const std::string& name,
                                 const v1::Probe& probe, int64_t now_ms,
                                 const std::string& token_sha256) {
  RETURN_IF_ERROR(CheckNonEmpty(worker_id, "worker_id"));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  RETURN_IF_ERROR(InsertFingerprint(conn_, probe.fingerprint()));
  RETURN_IF_ERROR(conn_.Execute(
      "INSERT INTO workers (worker_id, name, registered_at, last_heartbeat, "
      "fingerprint_hash, probe, token_sha256) "
      "VALUES (?, ?, ?, ?, NULLIF(?, ''), ?, ?) "
      "ON CONFLICT(worker_id) DO UPDATE SET name = excluded.name, "
      "last_heartbeat = excluded.last_heartbeat, "
      "fingerprint_hash = excluded.fingerprint_hash, probe = excluded.probe, "
      "token_sha256 = excluded.token_sha256",
      worker_id, name, now_ms, now_ms, probe.fingerprint().hash(),
      BlobRef{SerializeMessage(probe)}, token_sha256));
  RETURN_IF_ERROR(AppendProbeRows(conn_, worker_id, probe, now_ms));
  return txn.Commit();
}

absl::Status Store::TouchWorker(const std::string& worker_id, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  RETURN_IF_ERROR(
      conn_.Execute("UPDATE workers SET last_heartbeat = ? WHERE worker_id = ?",
                    now_ms, worker_id));
  if (conn_.Changes() == 0) {
    return absl::NotFoundError(
        absl::StrCat("worker '", worker_id, "' is not registered"));
  }
  return txn.Commit();
}

absl::StatusOr<std::vector<v1::WorkerInfo>> Store::ListWorkers() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement stmt,
                   conn_.Prepare(absl::StrCat(
                       "SELECT w.worker_id, w.name, w.last_heartbeat, w.probe, "
                       "(SELECT MAX(id) FROM trials WHERE state = ",
                       static_cast<int>(v1::LEASED),
                       " AND worker_id = w.worker_id) FROM workers AS w "
                       "ORDER BY w.worker_id")));
  std::vector<v1::WorkerInfo> workers;
  while (true) {
    ASSIGN_OR_RETURN(const bool has_row, stmt.Step());
    if (!has_row) return workers;
    v1::WorkerInfo& info = workers.emplace_back();
    info.set_worker_id(stmt.Text(0));
    info.set_name(stmt.Text(1));
    info.set_last_heartbeat_unix_ms(stmt.Int64(2));
    RETURN_IF_ERROR(ParseMessage(
        stmt.Blob(3), absl::StrCat("probe of worker '", info.worker_id(), "'"),
        info.mutable_probe()));
    info.set_current_trial_id(stmt.IsNull(4) ? 0 : stmt.Int64(4));
  }
}

absl::StatusOr<std::vector<v1::BackendProbe>> Store::LatestProbes(
    const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      conn_.Prepare("SELECT probe FROM workers WHERE worker_id = ?"));
  RETURN_IF_ERROR(stmt.BindAll(worker_id));
  ASSIGN_OR_RETURN(const bool found, stmt.Step());
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("worker '", worker_id, "' is not registered"));
  }
  // The worker row keeps the latest probe whole (an empty probe included,
  // which has no rows in `probes`); `probes` is the history.
  v1::Probe probe;
  RETURN_IF_ERROR(ParseMessage(
      stmt.Blob(0), absl::StrCat("probe of worker '", worker_id, "'"), &probe));
  return std::vector<v1::BackendProbe>(probe.backends().begin(),
                                       probe.backends().end());
}

absl::StatusOr<std::vector<WorkerIdentity>> Store::WorkerIdentities(
    int64_t since_ms) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      conn_.Prepare("SELECT worker_id, name, token_sha256, "
                    "last_heartbeat, probe FROM workers "
                    "WHERE last_heartbeat >= ? ORDER BY worker_id"));
  RETURN_IF_ERROR(stmt.BindAll(since_ms));
  std::vector<WorkerIdentity> identities;
  while (true) {
    ASSIGN_OR_RETURN(const bool has_row, stmt.Step());
    if (!has_row) return identities;
    WorkerIdentity& w = identities.emplace_back();
    w.worker_id = stmt.Text(0);
    w.name = stmt.Text(1);
    w.token_sha256 = stmt.Text(2);
    w.last_heartbeat_ms = stmt.Int64(3);
    RETURN_IF_ERROR(ParseMessage(
        stmt.Blob(4), absl::StrCat("probe of worker '", w.worker_id, "'"),
        &w.probe));
  }
}

}  // namespace moetune::db
