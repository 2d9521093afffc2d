// moetune's SQLite store: workers and their probes, environment fingerprints,
// sweeps, trials and every reported result. The coordinator is its only
// writer (docs/design.md §5); tools may read the file concurrently thanks to
// WAL.
//
// The connection is opened with journal_mode=WAL, synchronous=FULL (a
// committed result survives power loss), busy_timeout=5000 ms and
// foreign_keys=ON; the schema is brought up to date by db/migrations.h and
// the views are recreated from db/views.h. Every write is one BEGIN
// IMMEDIATE ... COMMIT transaction, rolled back on any error, so a failed
// call leaves nothing behind.
//
// Times are int64 ms since the Unix epoch supplied by the caller: the store
// has no clock, which keeps it deterministic under test.
//
// Trial state machine as the store enforces it:
//   QUEUED --LeaseTrial--> LEASED (attempt + 1)
//   LEASED --RequeueTrial--> QUEUED (worker lost; attempt kept)
//   LEASED --RecordResult (current attempt)--> DONE/FAILED/INCORRECT/TIMEOUT/
//                                              CANCELLED
//   QUEUED or LEASED --FinishTrial--> FAILED/UNAVAILABLE/CANCELLED
//   QUEUED --CancelSweep--> CANCELLED
// A trial's `state` is authoritative; its attached `result` is the recorded
// result with the highest attempt, which explains the state whenever the
// state came from a report.
//
// Thread-safety: thread-safe. One connection, guarded by one mutex: calls are
// serialised (SQLite has one writer anyway).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "db/sqlite.h"
#include "db/writer_lock.h"
#include "proto/moetune.pb.h"

namespace moetune::db {

// One page of a listing, and the token of the next ("" at the end).
struct TrialPage {
  std::vector<v1::Trial> trials;
  std::string next_page_token;
};
struct SweepPage {
  std::vector<v1::Sweep> sweeps;
  std::string next_page_token;
};

// A registration as the coordinator needs it after a restart.
struct WorkerIdentity {
  std::string worker_id;
  std::string name;
  std::string token_sha256;  // hex; "" for one stored without a token
  int64_t last_heartbeat_ms = 0;
  v1::Probe probe;
};

// Pages: default and largest sizes (QueryTrialPage, ListSweepPage).
inline constexpr int kDefaultTrialPage = 1000, kMaxTrialPage = 10000;
inline constexpr int kDefaultSweepPage = 100, kMaxSweepPage = 1000;

// The connection settings as SQLite reports them (not as requested).
struct StoreSettings {
  std::string journal_mode;  // "wal" for a file; "memory" for ":memory:"
  int synchronous = 0;       // 2 = FULL
  bool foreign_keys = false;
  int busy_timeout_ms = 0;
};

struct OpenOptions {
  // The coordinator: the database's one writer. Takes the writer lock
  // (writer_lock.h), refuses a database it cannot write, creates a missing
  // file, applies missing migrations and recreates the views. Otherwise
  // (tools that read a recording) the file is opened read-only: no lock, no
  // migration, no write.
  bool writer = true;
  // Recorded in the writer lock: who holds the database.
  std::string owner;
};

class Store {
 public:
  // Opens the database at `path` (":memory:" for a private in-memory one).
  // Every refusal is FAILED_PRECONDITION with one line naming the path and
  // the cause, and leaves the file as it was: a missing directory, a file
  // that is not a SQLite database, a schema newer than this build knows, a
  // read-only file or file system (for a writer), a database another
  // coordinator is writing (naming it), a missing file (for a reader).
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const std::string& path, const OpenOptions& options = {});

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Replaces the writer lock's recorded owner (e.g. with the address the
  // coordinator listens on, once it is bound). No-op for readers.
  absl::Status SetOwner(const std::string& owner);

  // The schema version of the open database (== LatestSchemaVersion()).
  int SchemaVersion() const { return schema_version_; }
  static int LatestSchemaVersion();
  // Reads the pragmas back from the connection: for tests and diagnostics.
  absl::StatusOr<StoreSettings> Settings();

  // ------------------------------------------------------------ workers --
  // Inserts or updates the worker (registered_at is kept from the first
  // registration; last_heartbeat becomes now_ms), stores the probe's
  // fingerprint and appends one probe row per backend. probed_at is
  // probe.probed_at_unix_ms, or now_ms when that is 0.
  absl::Status UpsertWorker(const std::string& worker_id,
                            const std::string& name, const v1::Probe& probe,
                            int64_t now_ms,
                            const std::string& token_sha256 = "");
  // Registrations whose last heartbeat is at or after `since_ms`, with
  // their token digests: what a restarted coordinator still honours.
  absl::StatusOr<std::vector<WorkerIdentity>> WorkerIdentities(
      int64_t since_ms);
  // NOT_FOUND when the worker never registered.
  absl::Status TouchWorker(const std::string& worker_id, int64_t now_ms);
  // Ordered by worker_id. `alive` is left false (the registry decides
  // liveness); current_trial_id is the LEASED trial held by the worker, if
  // any.
  absl::StatusOr<std::vector<v1::WorkerInfo>> ListWorkers();
  // The backends of the worker's latest probe, in the probe's order.
  absl::StatusOr<std::vector<v1::BackendProbe>> LatestProbes(
      const std::string& worker_id);

  // ------------------------------------------------------------- sweeps --
  // One transaction: the sweep (RUNNING) and all its trials (QUEUED, attempt
  // 0, workload_hash as given, which must be non-empty). On success fills
  // trial_id, sweep_id, state, attempt and updated_at of every *trials entry
  // and returns the sweep id; on failure *trials is unchanged. A trial
  // without its own measurement gets spec.measurement.
  // A non-empty request_id is stored with the sweep (unique: a second sweep
  // with it fails with ALREADY_EXISTS; see SweepForRequest).
  absl::StatusOr<int64_t> CreateSweep(const v1::SweepSpec& spec,
                                      std::vector<v1::Trial>* trials,
                                      int64_t now_ms,
                                      const std::string& request_id = "");
  // The sweep a submit with `request_id` created, if any.
  absl::StatusOr<std::optional<int64_t>> SweepForRequest(
      const std::string& request_id);
  // Appends trials a strategy proposed later to a RUNNING sweep, in one
  // transaction (QUEUED, attempt 0; the sweep's measurement when a trial has
  // none). Fills ids as CreateSweep does. FAILED_PRECONDITION when the sweep
  // is not RUNNING, NOT_FOUND when there is no such sweep.
  absl::Status AddTrials(int64_t sweep_id, std::vector<v1::Trial>* trials,
                         int64_t now_ms);

  // With trial_counts keyed by TrialState name and total_trials.
  absl::StatusOr<v1::Sweep> GetSweep(int64_t sweep_id);
  // Newest first; limit 0 = all.
  absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(int limit);
  // One page, newest first: at most page_size (0 = kDefaultSweepPage, at
  // most kMaxSweepPage) sweeps after page_token, and at most `limit` (0 =
  // no limit) over all pages. INVALID_ARGUMENT naming the field for a bad
  // size or a token this store did not issue.
  absl::StatusOr<SweepPage> ListSweepPage(int limit, int page_size,
                                          const std::string& page_token);
  // Any SweepState but UNSPECIFIED; finished_at becomes now_ms for FINISHED
  // and ABORTED and is cleared for RUNNING.
  absl::Status SetSweepState(int64_t sweep_id, v1::SweepState state,
                             int64_t now_ms);
  // QUEUED trials -> CANCELLED and the sweep -> ABORTED in one transaction.
  // LEASED trials are left for their worker's report. Cancelling an ABORTED
  // sweep is a no-op; a FINISHED one is FAILED_PRECONDITION.
  absl::Status CancelSweep(int64_t sweep_id, int64_t now_ms);

  // ------------------------------------------------------------- trials --
  absl::StatusOr<v1::Trial> GetTrial(int64_t trial_id);
  // Ordered by trial_id; every field of the filter left at its default
  // matches everything.
  absl::StatusOr<std::vector<v1::Trial>> QueryTrials(
      const v1::TrialFilter& filter);
  // One page of QueryTrials for the API: filter.page_size (0 =
  // kDefaultTrialPage, at most kMaxTrialPage) trials after
  // filter.page_token, at most filter.limit over all pages, raw samples only
  // with filter.include_samples.
  absl::StatusOr<TrialPage> QueryTrialPage(const v1::TrialFilter& filter);
  // The sweep's trials in a final state whose updated_at is >= since_ms,
  // without raw samples: what a watcher has not seen yet.
  absl::StatusOr<std::vector<v1::Trial>> FinalTrialsSince(int64_t sweep_id,
                                                          int64_t since_ms);
  // The oldest QUEUED trial (lowest id) whose backend is one of `backends`
  // and whose id is above `after_id`, if any: what a worker that can run
  // those is given next (after_id skips trials it cannot take now, such as
  // a gang trial whose gang cannot form yet).
  absl::StatusOr<std::optional<int64_t>> FirstQueuedTrial(
      const std::vector<std::string>& backends, int64_t after_id = 0);
  // The backends of the QUEUED trials, each once.
  absl::StatusOr<std::vector<std::string>> QueuedBackends();
  // Ordered by trial_id. For recovery after a coordinator restart.
  absl::StatusOr<std::vector<v1::Trial>> TrialsInStates(
      const std::vector<v1::TrialState>& states);
  // DONE trials of one workload across sweeps, ordered by trial_id.
  absl::StatusOr<std::vector<v1::Trial>> DoneTrialsForWorkload(
      const std::string& workload_hash);

  // QUEUED -> LEASED, attempt + 1, worker_id recorded. FAILED_PRECONDITION if
  // the trial is not QUEUED.
  absl::Status LeaseTrial(int64_t trial_id, const std::string& worker_id,
                          int64_t now_ms);
  // LEASED -> QUEUED (the worker was lost). FAILED_PRECONDITION otherwise.
  absl::Status RequeueTrial(int64_t trial_id, const std::string& reason,
                            int64_t now_ms);
  // A final state without a result: FAILED, UNAVAILABLE or CANCELLED, from
  // QUEUED or LEASED. FAILED_PRECONDITION if the trial is already final.
  absl::Status FinishTrial(int64_t trial_id, v1::TrialState state,
                           const std::string& reason, int64_t now_ms);

  // Stores a worker's report, idempotent by (trial_id, attempt): returns
  // false and changes nothing when that pair is already recorded. Otherwise
  // inserts the result (and its fingerprint) and returns true. The outcome
  // must be DONE, FAILED, INCORRECT, TIMEOUT or CANCELLED (a worker stopped
  // by its heartbeat reports CANCELLED).
  // In the same transaction the trial moves to result.outcome only if it is
  // LEASED and result.attempt is its current attempt, i.e. the report comes
  // from the lease holder. Any other report (an older attempt after a
  // re-queue, a trial already final, or one re-queued and not yet leased
  // again) is kept for the record without touching the trial. A report for
  // an attempt that was never leased (attempt > the trial's attempt) is
  // FAILED_PRECONDITION: it cannot come from a real lease.
  absl::StatusOr<bool> RecordResult(const v1::TrialResult& result,
                                    int64_t now_ms);
  // True when a result of (trial_id, attempt) is recorded.
  absl::StatusOr<bool> HasResult(int64_t trial_id, int attempt);

  // ---------------------------------------------------------- incumbents --
  // Records `trial_id` as the accepted best for (workload, fingerprint); the
  // history is kept, the latest acceptance is the incumbent.
  absl::Status SetIncumbent(const std::string& workload_hash,
                            const std::string& fingerprint_hash,
                            int64_t trial_id, int64_t now_ms);
  // The incumbents of one workload (one per fingerprint, with results): the
  // latest accepted best among trials of sweeps before `before_sweep_id`
  // (0 = any sweep), i.e. what that sweep had to beat.
  absl::StatusOr<std::vector<v1::Trial>> Incumbents(
      const std::string& workload_hash, int64_t before_sweep_id = 0);

  // See Connection::InjectFaultForTesting: makes a later statement fail so
  // that tests can check that transactions roll back.
  void InjectFaultForTesting(std::string sql_substring, int skip = 0);

 private:
  Store(Connection conn, int schema_version, std::optional<WriterLock> lock)
      : conn_(std::move(conn)),
        schema_version_(schema_version),
        lock_(std::move(lock)) {}

  absl::Mutex mu_;
  Connection conn_ ABSL_GUARDED_BY(mu_);
  const int schema_version_;
  std::optional<WriterLock> lock_;  // held for the writer's life
};

}  // namespace moetune::db
