// Store: trials, their state machine (lease, requeue, finish) and results.
#include <algorithm>

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

namespace {

// The WHERE conditions of a filter's fields (sweep, state, backend,
// workload).
absl::Status FilterConditions(const v1::TrialFilter& filter,
                              std::vector<std::string>* conditions,
                              std::vector<Param>* params_out) {
  std::vector<Param>& params = *params_out;
  if (filter.sweep_id() != 0) {
    conditions->push_back("t.sweep_id = ?");
    params.push_back(filter.sweep_id());
  }
  if (filter.state() != v1::TRIAL_STATE_UNSPECIFIED) {
    RETURN_IF_ERROR(CheckTrialStateFilter(filter.state(), "filter.state"));
    conditions->push_back("t.state = ?");
    params.push_back(int64_t{filter.state()});
  }
  if (!filter.moe_backend().empty()) {
    conditions->push_back("t.moe_backend = ?");
    params.push_back(filter.moe_backend());
  }
  if (!filter.workload_hash().empty()) {
    conditions->push_back("t.workload_hash = ?");
    params.push_back(filter.workload_hash());
  }
  return absl::OkStatus();
}

}  // namespace

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
  RETURN_IF_ERROR(FilterConditions(filter, &conditions, &params));
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

absl::StatusOr<std::optional<int64_t>> Store::FirstQueuedTrial(
    const std::vector<std::string>& backends, int64_t after_id) {
  absl::MutexLock lock(&mu_);
  // One index probe per backend: with an IN list SQLite would sort every
  // queued trial of those backends to find the first.
  ASSIGN_OR_RETURN(
      Statement query,
      conn_.Prepare("SELECT id FROM trials WHERE state = ? AND "
                    "moe_backend = ? AND id > ? ORDER BY id LIMIT 1"));
  std::optional<int64_t> first;
  for (const std::string& backend : backends) {
    query.Reset();
    RETURN_IF_ERROR(query.BindAll(int64_t{v1::QUEUED}, backend, after_id));
    ASSIGN_OR_RETURN(const bool row, query.Step());
    if (row && (!first.has_value() || query.Int64(0) < *first)) {
      first = query.Int64(0);
    }
  }
  return first;
}

absl::StatusOr<std::vector<std::string>> Store::QueuedBackends() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement query,
                   conn_.Prepare("SELECT DISTINCT moe_backend FROM trials "
                                 "WHERE state = ? ORDER BY moe_backend"));
  RETURN_IF_ERROR(query.BindAll(int64_t{v1::QUEUED}));
  std::vector<std::string> backends;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, query.Step());
    if (!row) break;
    backends.push_back(query.Text(0));
  }
  return backends;
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

absl::StatusOr<bool> Store::HasResult(int64_t trial_id, int attempt) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement query,
                   conn_.Prepare("SELECT 1 FROM results "
                                 "WHERE trial_id = ? AND attempt = ?"));
  RETURN_IF_ERROR(query.BindAll(trial_id, attempt));
  return query.Step();
}

absl::StatusOr<TrialPage> Store::QueryTrialPage(const v1::TrialFilter& filter) {
  ASSIGN_OR_RETURN(const int size,
                   PageSize(filter.page_size(), kDefaultTrialPage,
                            kMaxTrialPage, "filter.page_size"));
  RETURN_IF_ERROR(CheckLimit(filter.limit(), "filter.limit"));
  ASSIGN_OR_RETURN(const PageCursor cursor,
                   ParsePageToken(filter.page_token(), 't', "filter.page_token",
                                  filter.limit()));
  const int64_t take =
      cursor.remaining > 0 ? std::min<int64_t>(size, cursor.remaining) : size;
  std::vector<std::string> conditions;
  std::vector<Param> params;
  RETURN_IF_ERROR(FilterConditions(filter, &conditions, &params));
  conditions.push_back("t.id > ?");
  params.push_back(cursor.after);
  TrialPage page;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(page.trials, SelectTrials(conn_, conditions, params,
                                               static_cast<int>(take + 1),
                                               filter.include_samples()));
  }
  const bool more = static_cast<int64_t>(page.trials.size()) > take;
  if (more) page.trials.pop_back();
  if (more && !(cursor.remaining > 0 && cursor.remaining <= take)) {
    page.next_page_token =
        PageToken('t', page.trials.back().trial_id(),
                  cursor.remaining > 0 ? cursor.remaining - take : 0);
  }
  return page;
}

absl::StatusOr<std::vector<v1::Trial>> Store::FinalTrialsSince(
    int64_t sweep_id, int64_t since_ms) {
  absl::MutexLock lock(&mu_);
  // The subquery makes SQLite range-scan trials_by_sweep_update rather than
  // walk the whole sweep in id order.
  return SelectTrials(
      conn_,
      {"t.id IN (SELECT id FROM trials WHERE sweep_id = ? AND updated_at >= ?)",
       absl::StrCat("t.state NOT IN (", static_cast<int>(v1::QUEUED), ", ",
                    static_cast<int>(v1::LEASED), ")")},
      {sweep_id, since_ms}, 0, /*with_samples=*/false);
}

}  // namespace moetune::db
