#include "db/store.h"

#include <limits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "db/codec.h"
#include "db/migrations.h"

namespace moetune::db {
namespace {

using v1::SweepState;
using v1::TrialState;

constexpr int kBusyTimeoutMs = 5000;

// ------------------------------------------------------------ validation --

bool IsFinal(TrialState state) {
  switch (state) {
    case v1::DONE:
    case v1::FAILED:
    case v1::INCORRECT:
    case v1::TIMEOUT:
    case v1::CANCELLED:
    case v1::UNAVAILABLE:
      return true;
    default:
      return false;
  }
}

std::string StateName(TrialState state) {
  const std::string& name = v1::TrialState_Name(state);
  return name.empty() ? absl::StrCat("state ", static_cast<int>(state)) : name;
}

absl::Status CheckNonEmpty(const std::string& value, std::string_view field) {
  if (!value.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      absl::string_view(field.data(), field.size()), " must not be empty"));
}

// Trials about to be inserted: present, each with its workload hash.
absl::Status CheckTrialsToInsert(const std::vector<v1::Trial>* trials) {
  if (trials == nullptr) return absl::InvalidArgumentError("trials is null");
  for (size_t i = 0; i < trials->size(); ++i) {
    RETURN_IF_ERROR(
        CheckNonEmpty((*trials)[i].workload_hash(),
                      absl::StrCat("trials[", i, "].workload_hash")));
  }
  return absl::OkStatus();
}

absl::Status CheckTrialStateFilter(int state, std::string_view field) {
  if (v1::TrialState_IsValid(state) && state != v1::TRIAL_STATE_UNSPECIFIED) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      absl::string_view(field.data(), field.size()), " is ", state,
      "; allowed: QUEUED, LEASED, DONE, FAILED, INCORRECT, UNAVAILABLE, "
      "CANCELLED, TIMEOUT"));
}

absl::Status CheckLimit(int limit, std::string_view field) {
  if (limit >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(absl::string_view(field.data(), field.size()), " is ", limit,
                   "; allowed: 0 (all) or a positive count"));
}

absl::Status CheckResult(const v1::TrialResult& result) {
  if (result.trial_id() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "result.trial_id is ", result.trial_id(), "; must be > 0"));
  }
  if (result.attempt() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "result.attempt is ", result.attempt(), "; must be >= 1 (1-based)"));
  }
  // CANCELLED: a worker told by its heartbeat to stop reports the trial so.
  switch (result.outcome()) {
    case v1::DONE:
    case v1::FAILED:
    case v1::INCORRECT:
    case v1::TIMEOUT:
    case v1::CANCELLED:
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "result.outcome is ", StateName(result.outcome()),
          "; allowed: DONE, FAILED, INCORRECT, TIMEOUT, CANCELLED"));
  }
}

// --------------------------------------------------------------- opening --

// Pragmas are per connection and must be set outside a transaction.
absl::Status Configure(Connection& conn) {
  // First, so that switching to WAL waits for other users of the file.
  RETURN_IF_ERROR(
      conn.Exec(absl::StrCat("PRAGMA busy_timeout = ", kBusyTimeoutMs)));
  ASSIGN_OR_RETURN(const std::string mode,
                   conn.QueryText("PRAGMA journal_mode = WAL"));
  // An in-memory database has no journal file and reports "memory".
  if (mode != "wal" && mode != "memory") {
    return absl::FailedPreconditionError(
        absl::StrCat("journal_mode is '", mode,
                     "' after asking for WAL; the file system may not "
                     "support WAL"));
  }
  RETURN_IF_ERROR(conn.Exec("PRAGMA synchronous = FULL"));
  RETURN_IF_ERROR(conn.Exec("PRAGMA foreign_keys = ON"));
  ASSIGN_OR_RETURN(const int64_t fk, conn.QueryInt64("PRAGMA foreign_keys"));
  if (fk != 1) {
    return absl::FailedPreconditionError(
        "this SQLite build cannot enforce foreign keys");
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- writes --

// Fingerprints are content-addressed: an existing hash is left as it is.
absl::Status InsertFingerprint(Connection& conn, const v1::Fingerprint& fp) {
  if (fp.hash().empty()) return absl::OkStatus();
  return conn.Execute(
      "INSERT INTO fingerprints (hash, device_name, sm_arch, sm_count, "
      "sm_clock_mhz, mem_clock_mhz, driver_version, cuda_version, "
      "nccl_version, build_hash, fingerprint) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT(hash) DO NOTHING",
      fp.hash(), fp.device_name(), fp.sm_arch(), fp.sm_count(),
      fp.sm_clock_mhz(), fp.mem_clock_mhz(), fp.driver_version(),
      fp.cuda_version(), fp.nccl_version(), fp.build_hash(),
      BlobRef{SerializeMessage(fp)});
}

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

absl::StatusOr<std::vector<int64_t>> InsertTrials(
    Connection& conn, int64_t sweep_id, const v1::SweepSpec& spec,
    const std::vector<v1::Trial>& trials, int64_t now_ms) {
  ASSIGN_OR_RETURN(
      Statement insert,
      conn.Prepare(absl::StrCat(
          "INSERT INTO trials (sweep_id, state, attempt, moe_backend, "
          "workload_hash, workload, config, measurement, updated_at, rung, "
          "confirm_round, proposal_key) VALUES (?, ",
          static_cast<int>(v1::QUEUED), ", 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)")));
  std::vector<int64_t> ids;
  ids.reserve(trials.size());
  for (const v1::Trial& trial : trials) {
    // A trial without its own measurement settings runs with the sweep's.
    const v1::Measurement& measurement =
        trial.has_measurement() ? trial.measurement() : spec.measurement();
    insert.Reset();
    RETURN_IF_ERROR(insert.BindAll(
        sweep_id, trial.config().moe_backend(), trial.workload_hash(),
        BlobRef{SerializeMessage(trial.workload())},
        BlobRef{SerializeMessage(trial.config())},
        BlobRef{SerializeMessage(measurement)}, now_ms,
        static_cast<int64_t>(trial.rung()),
        static_cast<int64_t>(trial.confirm_round()), trial.proposal_key()));
    RETURN_IF_ERROR(insert.Run());
    ids.push_back(conn.LastInsertRowId());
  }
  return ids;
}

// After a committed InsertTrials: what the rows now say, copied back into
// the caller's trials.
void MarkInserted(int64_t sweep_id, const v1::SweepSpec& spec,
                  const std::vector<int64_t>& ids, int64_t now_ms,
                  std::vector<v1::Trial>* trials) {
  for (size_t i = 0; i < trials->size(); ++i) {
    v1::Trial& trial = (*trials)[i];
    trial.set_trial_id(ids[i]);
    trial.set_sweep_id(sweep_id);
    trial.set_state(v1::QUEUED);
    trial.set_attempt(0);
    trial.set_updated_at_unix_ms(now_ms);
    if (!trial.has_measurement()) {
      *trial.mutable_measurement() = spec.measurement();
    }
  }
}

absl::Status InsertResult(Connection& conn, const v1::TrialResult& result,
                          int64_t now_ms) {
  // The raw samples live in their own column; the blob keeps the rest.
  v1::TrialResult rest = result;
  rest.clear_samples_us();
  const v1::TimingStats& stats = result.stats();
  // REAL columns are there to filter and sort on; SQLite stores a NaN as
  // NULL, which is why they are nullable. The blob keeps exact values.
  return conn.Execute(
      "INSERT INTO results (trial_id, attempt, outcome, worker_id, "
      "median_us, mean_us, p90_us, p99_us, stddev_us, ci_low_us, ci_high_us, "
      "floor_us, efficiency, max_rel_error, fingerprint_hash, samples, "
      "result, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?, NULLIF(?, ''), ?, ?, ?)",
      result.trial_id(), result.attempt(), static_cast<int>(result.outcome()),
      result.worker_id(), stats.median_us(), stats.mean_us(), stats.p90_us(),
      stats.p99_us(), stats.stddev_us(), stats.ci_low_us(), stats.ci_high_us(),
      result.roofline().floor_us(), result.roofline().efficiency(),
      result.max_rel_error(), result.fingerprint().hash(),
      BlobRef{EncodeSamples(std::span<const double>(
          result.samples_us().data(), result.samples_us().size()))},
      BlobRef{SerializeMessage(rest)}, now_ms);
}

// ----------------------------------------------------------------- reads --

struct TrialHead {
  TrialState state;
  int attempt;
};

absl::StatusOr<TrialHead> LoadTrialHead(Connection& conn, int64_t trial_id) {
  ASSIGN_OR_RETURN(Statement stmt,
                   conn.Prepare("SELECT state, attempt FROM trials "
                                "WHERE id = ?"));
  RETURN_IF_ERROR(stmt.BindAll(trial_id));
  ASSIGN_OR_RETURN(const bool found, stmt.Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("trial ", trial_id, " not found"));
  }
  return TrialHead{static_cast<TrialState>(stmt.Int64(0)),
                   static_cast<int>(stmt.Int64(1))};
}

// The trial columns followed by its highest-attempt result, if any.
constexpr std::string_view kSelectTrials =
    "SELECT t.id, t.sweep_id, t.state, t.attempt, t.worker_id, t.reason, "
    "t.workload_hash, t.workload, t.config, t.measurement, t.updated_at, "
    "r.result, r.samples, t.rung, t.confirm_round, t.proposal_key "
    "FROM trials AS t LEFT JOIN results AS r "
    "ON r.trial_id = t.id AND r.attempt = "
    "(SELECT MAX(attempt) FROM results WHERE trial_id = t.id)";

absl::Status ResultFromRow(const Statement& row, int64_t trial_id,
                           v1::TrialResult* result) {
  RETURN_IF_ERROR(ParseMessage(
      row.Blob(11), absl::StrCat("result of trial ", trial_id), result));
  ASSIGN_OR_RETURN(const std::vector<double> samples,
                   DecodeSamples(row.Blob(12)));
  result->mutable_samples_us()->Assign(samples.begin(), samples.end());
  return absl::OkStatus();
}

absl::StatusOr<v1::Trial> TrialFromRow(const Statement& row) {
  v1::Trial trial;
  trial.set_trial_id(row.Int64(0));
  trial.set_sweep_id(row.Int64(1));
  trial.set_state(static_cast<TrialState>(row.Int64(2)));
  trial.set_attempt(static_cast<int32_t>(row.Int64(3)));
  trial.set_worker_id(row.Text(4));
  trial.set_reason(row.Text(5));
  trial.set_workload_hash(row.Text(6));
  const std::string of = absl::StrCat(" of trial ", trial.trial_id());
  RETURN_IF_ERROR(ParseMessage(row.Blob(7), absl::StrCat("workload", of),
                               trial.mutable_workload()));
  RETURN_IF_ERROR(ParseMessage(row.Blob(8), absl::StrCat("config", of),
                               trial.mutable_config()));
  RETURN_IF_ERROR(ParseMessage(row.Blob(9), absl::StrCat("measurement", of),
                               trial.mutable_measurement()));
  trial.set_updated_at_unix_ms(row.Int64(10));
  trial.set_rung(static_cast<int32_t>(row.Int64(13)));
  trial.set_confirm_round(static_cast<int32_t>(row.Int64(14)));
  trial.set_proposal_key(row.Text(15));
  if (!row.IsNull(11)) {
    RETURN_IF_ERROR(
        ResultFromRow(row, trial.trial_id(), trial.mutable_result()));
  }
  return trial;
}

using Param = std::variant<int64_t, std::string>;

// Trials matching every condition (SQL over alias t, with ? placeholders
// bound from params in order), ordered by id; limit 0 = all.
absl::StatusOr<std::vector<v1::Trial>> SelectTrials(
    Connection& conn, const std::vector<std::string>& conditions,
    const std::vector<Param>& params, int limit) {
  std::string sql(kSelectTrials);
  if (!conditions.empty()) {
    absl::StrAppend(&sql, " WHERE ", absl::StrJoin(conditions, " AND "));
  }
  absl::StrAppend(&sql, " ORDER BY t.id LIMIT ", limit > 0 ? limit : -1);
  ASSIGN_OR_RETURN(Statement stmt, conn.Prepare(sql));
  for (size_t i = 0; i < params.size(); ++i) {
    RETURN_IF_ERROR(std::visit(
        [&](const auto& value) {
          return stmt.Bind(static_cast<int>(i) + 1, value);
        },
        params[i]));
  }
  std::vector<v1::Trial> trials;
  while (true) {
    ASSIGN_OR_RETURN(const bool has_row, stmt.Step());
    if (!has_row) return trials;
    ASSIGN_OR_RETURN(v1::Trial trial, TrialFromRow(stmt));
    trials.push_back(std::move(trial));
  }
}

constexpr std::string_view kSelectSweeps =
    "SELECT id, name, spec, state, created_at, finished_at FROM sweeps";

absl::Status FillTrialCounts(Connection& conn, v1::Sweep* sweep) {
  ASSIGN_OR_RETURN(Statement stmt,
                   conn.Prepare("SELECT state, COUNT(*) FROM trials "
                                "WHERE sweep_id = ? GROUP BY state"));
  RETURN_IF_ERROR(stmt.BindAll(sweep->sweep_id()));
  int total = 0;
  while (true) {
    ASSIGN_OR_RETURN(const bool has_row, stmt.Step());
    if (!has_row) break;
    const int count = static_cast<int>(stmt.Int64(1));
    (*sweep->mutable_trial_counts())[StateName(
        static_cast<TrialState>(stmt.Int64(0)))] = count;
    total += count;
  }
  sweep->set_total_trials(total);
  return absl::OkStatus();
}

absl::StatusOr<v1::Sweep> SweepFromRow(Connection& conn, const Statement& row) {
  v1::Sweep sweep;
  sweep.set_sweep_id(row.Int64(0));
  sweep.set_name(row.Text(1));
  RETURN_IF_ERROR(ParseMessage(row.Blob(2),
                               absl::StrCat("spec of sweep ", row.Int64(0)),
                               sweep.mutable_spec()));
  sweep.set_state(static_cast<SweepState>(row.Int64(3)));
  sweep.set_created_at_unix_ms(row.Int64(4));
  sweep.set_finished_at_unix_ms(row.IsNull(5) ? 0 : row.Int64(5));
  RETURN_IF_ERROR(FillTrialCounts(conn, &sweep));
  return sweep;
}

absl::StatusOr<std::vector<v1::Sweep>> SelectSweeps(Connection& conn,
                                                    std::string_view tail,
                                                    int64_t param) {
  ASSIGN_OR_RETURN(
      Statement stmt,
      conn.Prepare(absl::StrCat(
          absl::string_view(kSelectSweeps.data(), kSelectSweeps.size()), " ",
          absl::string_view(tail.data(), tail.size()))));
  RETURN_IF_ERROR(stmt.BindAll(param));
  std::vector<v1::Sweep> sweeps;
  while (true) {
    ASSIGN_OR_RETURN(const bool has_row, stmt.Step());
    if (!has_row) return sweeps;
    ASSIGN_OR_RETURN(v1::Sweep sweep, SweepFromRow(conn, stmt));
    sweeps.push_back(std::move(sweep));
  }
}

// Sets a trial's state, reason and updated_at (and nothing else).
absl::Status UpdateTrialState(Connection& conn, int64_t trial_id,
                              TrialState state, const std::string& reason,
                              int64_t now_ms) {
  return conn.Execute(
      "UPDATE trials SET state = ?, reason = ?, updated_at = ? WHERE id = ?",
      static_cast<int>(state), reason, now_ms, trial_id);
}

absl::Status WrongState(int64_t trial_id, TrialState state,
                        std::string_view wanted, std::string_view action) {
  return absl::FailedPreconditionError(
      absl::StrCat("trial ", trial_id, " is ", StateName(state), ", not ",
                   absl::string_view(wanted.data(), wanted.size()), ": cannot ",
                   absl::string_view(action.data(), action.size())));
}

}  // namespace

// ------------------------------------------------------------------ Store --

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  ASSIGN_OR_RETURN(Connection conn, Connection::Open(path));
  RETURN_IF_ERROR(Configure(conn));
  ASSIGN_OR_RETURN(const int version, Migrate(conn, ShippedMigrations()));
  return std::unique_ptr<Store>(new Store(std::move(conn), version));
}

int Store::LatestSchemaVersion() { return LatestMigrationVersion(); }

absl::StatusOr<StoreSettings> Store::Settings() {
  absl::MutexLock lock(&mu_);
  StoreSettings settings;
  ASSIGN_OR_RETURN(settings.journal_mode,
                   conn_.QueryText("PRAGMA journal_mode"));
  ASSIGN_OR_RETURN(const int64_t synchronous,
                   conn_.QueryInt64("PRAGMA synchronous"));
  ASSIGN_OR_RETURN(const int64_t foreign_keys,
                   conn_.QueryInt64("PRAGMA foreign_keys"));
  ASSIGN_OR_RETURN(const int64_t busy_timeout,
                   conn_.QueryInt64("PRAGMA busy_timeout"));
  settings.synchronous = static_cast<int>(synchronous);
  settings.foreign_keys = foreign_keys != 0;
  settings.busy_timeout_ms = static_cast<int>(busy_timeout);
  return settings;
}

void Store::InjectFaultForTesting(std::string sql_substring, int skip) {
  absl::MutexLock lock(&mu_);
  conn_.InjectFaultForTesting(std::move(sql_substring), skip);
}

absl::Status Store::UpsertWorker(const std::string& worker_id,
                                 const std::string& name,
                                 const v1::Probe& probe, int64_t now_ms) {
  RETURN_IF_ERROR(CheckNonEmpty(worker_id, "worker_id"));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  RETURN_IF_ERROR(InsertFingerprint(conn_, probe.fingerprint()));
  RETURN_IF_ERROR(conn_.Execute(
      "INSERT INTO workers (worker_id, name, registered_at, last_heartbeat, "
      "fingerprint_hash, probe) VALUES (?, ?, ?, ?, NULLIF(?, ''), ?) "
      "ON CONFLICT(worker_id) DO UPDATE SET name = excluded.name, "
      "last_heartbeat = excluded.last_heartbeat, "
      "fingerprint_hash = excluded.fingerprint_hash, probe = excluded.probe",
      worker_id, name, now_ms, now_ms, probe.fingerprint().hash(),
      BlobRef{SerializeMessage(probe)}));
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

absl::StatusOr<v1::Trial> Store::GetTrial(int64_t trial_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::vector<v1::Trial> trials,
                   SelectTrials(conn_, {"t.id = ?"}, {trial_id}, 1));
  if (trials.empty()) {
    return absl::NotFoundError(absl::StrCat("trial ", trial_id, " not found"));
  }
  return std::move(trials.front());
}

absl::StatusOr<std::vector<v1::Trial>> Store::QueryTrials(
    const v1::TrialFilter& filter) {
  std::vector<std::string> conditions;
  std::vector<Param> params;
  if (filter.sweep_id() != 0) {
    conditions.push_back("t.sweep_id = ?");
    params.push_back(filter.sweep_id());
  }
  if (filter.state() != v1::TRIAL_STATE_UNSPECIFIED) {
    RETURN_IF_ERROR(CheckTrialStateFilter(filter.state(), "filter.state"));
    conditions.push_back("t.state = ?");
    params.push_back(int64_t{filter.state()});
  }
  if (!filter.moe_backend().empty()) {
    conditions.push_back("t.moe_backend = ?");
    params.push_back(filter.moe_backend());
  }
  if (!filter.workload_hash().empty()) {
    conditions.push_back("t.workload_hash = ?");
    params.push_back(filter.workload_hash());
  }
  RETURN_IF_ERROR(CheckLimit(filter.limit(), "filter.limit"));
  absl::MutexLock lock(&mu_);
  return SelectTrials(conn_, conditions, params, filter.limit());
}

absl::StatusOr<std::vector<v1::Trial>> Store::TrialsInStates(
    const std::vector<v1::TrialState>& states) {
  if (states.empty()) return std::vector<v1::Trial>();
  std::vector<Param> params;
  for (size_t i = 0; i < states.size(); ++i) {
    RETURN_IF_ERROR(
        CheckTrialStateFilter(states[i], absl::StrCat("states[", i, "]")));
    params.push_back(int64_t{states[i]});
  }
  std::vector<std::string> placeholders(states.size(), "?");
  const std::string in =
      absl::StrCat("t.state IN (", absl::StrJoin(placeholders, ", "), ")");
  absl::MutexLock lock(&mu_);
  return SelectTrials(conn_, {in}, params, 0);
}

absl::StatusOr<std::vector<v1::Trial>> Store::DoneTrialsForWorkload(
    const std::string& workload_hash) {
  RETURN_IF_ERROR(CheckNonEmpty(workload_hash, "workload_hash"));
  absl::MutexLock lock(&mu_);
  return SelectTrials(conn_, {"t.workload_hash = ?", "t.state = ?"},
                      {workload_hash, int64_t{v1::DONE}}, 0);
}

absl::Status Store::LeaseTrial(int64_t trial_id, const std::string& worker_id,
                               int64_t now_ms) {
  RETURN_IF_ERROR(CheckNonEmpty(worker_id, "worker_id"));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  ASSIGN_OR_RETURN(const TrialHead head, LoadTrialHead(conn_, trial_id));
  if (head.state != v1::QUEUED) {
    return WrongState(trial_id, head.state, "QUEUED", "lease it");
  }
  RETURN_IF_ERROR(conn_.Execute(
      "UPDATE trials SET state = ?, attempt = attempt + 1, worker_id = ?, "
      "reason = '', updated_at = ? WHERE id = ?",
      static_cast<int>(v1::LEASED), worker_id, now_ms, trial_id));
  return txn.Commit();
}

absl::Status Store::RequeueTrial(int64_t trial_id, const std::string& reason,
                                 int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  ASSIGN_OR_RETURN(const TrialHead head, LoadTrialHead(conn_, trial_id));
  if (head.state != v1::LEASED) {
    return WrongState(trial_id, head.state, "LEASED", "re-queue it");
  }
  RETURN_IF_ERROR(
      UpdateTrialState(conn_, trial_id, v1::QUEUED, reason, now_ms));
  return txn.Commit();
}

absl::Status Store::FinishTrial(int64_t trial_id, v1::TrialState state,
                                const std::string& reason, int64_t now_ms) {
  if (state != v1::FAILED && state != v1::UNAVAILABLE &&
      state != v1::CANCELLED) {
    return absl::InvalidArgumentError(
        absl::StrCat("state is ", StateName(state),
                     "; allowed: FAILED, UNAVAILABLE, CANCELLED (other final "
                     "states come with a result: use RecordResult)"));
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  ASSIGN_OR_RETURN(const TrialHead head, LoadTrialHead(conn_, trial_id));
  if (IsFinal(head.state)) {
    return WrongState(trial_id, head.state, "QUEUED or LEASED", "finish it");
  }
  RETURN_IF_ERROR(UpdateTrialState(conn_, trial_id, state, reason, now_ms));
  return txn.Commit();
}

absl::StatusOr<bool> Store::RecordResult(const v1::TrialResult& result,
                                         int64_t now_ms) {
  RETURN_IF_ERROR(CheckResult(result));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_));
  ASSIGN_OR_RETURN(Statement dup,
                   conn_.Prepare("SELECT 1 FROM results "
                                 "WHERE trial_id = ? AND attempt = ?"));
  RETURN_IF_ERROR(dup.BindAll(result.trial_id(), result.attempt()));
  ASSIGN_OR_RETURN(const bool duplicate, dup.Step());
  if (duplicate) return false;  // txn rolls back: nothing was written
  ASSIGN_OR_RETURN(const TrialHead head,
                   LoadTrialHead(conn_, result.trial_id()));
  if (result.attempt() > head.attempt) {
    return absl::FailedPreconditionError(
        absl::StrCat("result.attempt is ", result.attempt(), " but trial ",
                     result.trial_id(), " has been leased ", head.attempt,
                     " time(s): no such lease"));
  }
  RETURN_IF_ERROR(InsertFingerprint(conn_, result.fingerprint()));
  RETURN_IF_ERROR(InsertResult(conn_, result, now_ms));
  // Only the lease holder's report decides the state; others are history.
  if (head.state == v1::LEASED && result.attempt() == head.attempt) {
    RETURN_IF_ERROR(UpdateTrialState(conn_, result.trial_id(), result.outcome(),
                                     result.reason(), now_ms));
  }
  RETURN_IF_ERROR(txn.Commit());
  return true;
}

}  // namespace moetune::db
