// Rows of the trials, results and fingerprints tables as the Store reads and
// writes them: the checks a write needs, inserts, the trial SELECT with its
// latest result, and state updates. Internal to db/ (the Store's .cc files; not
// part of its API); functions take the open connection and run inside the
// caller's transaction. Not thread-safe (the Store's lock guards the
// connection).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "db/sqlite.h"
#include "proto/moetune.pb.h"

namespace moetune::db {

using v1::TrialState;

// ------------------------------------------------------------ validation --

bool IsFinal(TrialState state);

std::string StateName(TrialState state);

absl::Status CheckNonEmpty(const std::string& value, std::string_view field);

// Trials about to be inserted: present, each with its workload hash.
absl::Status CheckTrialsToInsert(const std::vector<v1::Trial>* trials);

absl::Status CheckTrialStateFilter(int state, std::string_view field);

absl::Status CheckLimit(int limit, std::string_view field);

absl::Status CheckResult(const v1::TrialResult& result);

// ---------------------------------------------------------------- writes --

// Fingerprints are content-addressed: an existing hash is left as it is.
absl::Status InsertFingerprint(Connection& conn, const v1::Fingerprint& fp);

absl::StatusOr<std::vector<int64_t>> InsertTrials(
    Connection& conn, int64_t sweep_id, const v1::SweepSpec& spec,
    const std::vector<v1::Trial>& trials, int64_t now_ms);

// After a committed InsertTrials: what the rows now say, copied back into
// the caller's trials.
void MarkInserted(int64_t sweep_id, const v1::SweepSpec& spec,
                  const std::vector<int64_t>& ids, int64_t now_ms,
                  std::vector<v1::Trial>* trials);

absl::Status InsertResult(Connection& conn, const v1::TrialResult& result,
                          int64_t now_ms);

// ----------------------------------------------------------------- reads --

struct TrialHead {
  TrialState state;
  int attempt;
};

absl::StatusOr<TrialHead> LoadTrialHead(Connection& conn, int64_t trial_id);

absl::Status ResultFromRow(const Statement& row, int64_t trial_id,
                           v1::TrialResult* result);

absl::StatusOr<v1::Trial> TrialFromRow(const Statement& row);

// Moves a stored config's or spec space's legacy all-reduce and attention
// strings into its enums (NormalizeLegacyFields), as every read of one
// does. DATA_LOSS naming `what` ("config of trial 7") for a string that
// names no value.
absl::Status ReadLegacyFields(std::string_view what, v1::TrialConfig* config);
absl::Status ReadLegacyFields(std::string_view what, v1::SearchSpace* space);

using Param = std::variant<int64_t, std::string>;

// Trials matching every condition (SQL over alias t, with ? placeholders
// bound from params in order), ordered by id; limit 0 = all. Without
// samples, results carry their statistics but not the raw samples.
absl::StatusOr<std::vector<v1::Trial>> SelectTrials(
    Connection& conn, const std::vector<std::string>& conditions,
    const std::vector<Param>& params, int limit, bool with_samples = true);

// Sets a trial's state, reason and updated_at (and nothing else).
absl::Status UpdateTrialState(Connection& conn, int64_t trial_id,
                              TrialState state, const std::string& reason,
                              int64_t now_ms);

absl::Status WrongState(int64_t trial_id, TrialState state,
                        std::string_view wanted, std::string_view action);

}  // namespace moetune::db
