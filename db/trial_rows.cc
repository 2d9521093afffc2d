#include "db/trial_rows.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/legacy_spelling.h"
#include "common/status_macros.h"
#include "db/codec.h"
#include "db/trial_dimensions.h"

namespace moetune::db {
namespace {

// The trial columns followed by its highest-attempt result, if any.
constexpr std::string_view kSelectTrials =
    "SELECT t.id, t.sweep_id, t.state, t.attempt, t.worker_id, t.reason, "
    "t.workload_hash, t.workload, t.config, t.measurement, t.updated_at, "
    "r.result, %SAMPLES%, t.rung, t.confirm_round, t.proposal_key "
    "FROM trials AS t LEFT JOIN results AS r "
    "ON r.trial_id = t.id AND r.attempt = "
    "(SELECT MAX(attempt) FROM results WHERE trial_id = t.id)";

}  // namespace

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

namespace {

template <typename Message>
absl::Status MoveLegacyFields(std::string_view what, Message* message) {
  const absl::Status status = NormalizeLegacyFields(*message);
  if (status.ok()) return status;
  return absl::DataLossError(absl::StrCat(
      absl::string_view(what.data(), what.size()), ": ", status.message()));
}

}  // namespace

absl::Status ReadLegacyFields(std::string_view what, v1::TrialConfig* config) {
  return MoveLegacyFields(what, config);
}

absl::Status ReadLegacyFields(std::string_view what, v1::SearchSpace* space) {
  return MoveLegacyFields(what, space);
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
    RETURN_IF_ERROR(WriteTrialDimensions(conn, ids.back(), trial.workload(),
                                         trial.config()));
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

absl::Status ResultFromRow(const Statement& row, int64_t trial_id,
                           v1::TrialResult* result) {
  RETURN_IF_ERROR(ParseMessage(
      row.Blob(11), absl::StrCat("result of trial ", trial_id), result));
  if (row.IsNull(12)) return absl::OkStatus();  // samples not asked for
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
  RETURN_IF_ERROR(
      ReadLegacyFields(absl::StrCat("config", of), trial.mutable_config()));
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

// Trials matching every condition (SQL over alias t, with ? placeholders
// bound from params in order), ordered by id; limit 0 = all.
absl::StatusOr<std::vector<v1::Trial>> SelectTrials(
    Connection& conn, const std::vector<std::string>& conditions,
    const std::vector<Param>& params, int limit, bool with_samples) {
  std::string sql = absl::StrReplaceAll(
      absl::string_view(kSelectTrials.data(), kSelectTrials.size()),
      {{"%SAMPLES%", with_samples ? "r.samples" : "NULL"}});
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

}  // namespace moetune::db
