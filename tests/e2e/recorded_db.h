// Builds a coordinator database from a recorded sweep (tests/data/*.json: a
// QueryTrialsResponse in the JSON mapping) through the Store, as a real
// coordinator would have written it: the sweep, its trials, every result
// under its lease, the final states. For tests that need real data behind a
// real coordinator without running the trials again.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"

namespace moetune::e2e {

// The recorded sweep's trials (its file read and parsed).
absl::StatusOr<v1::QueryTrialsResponse> ReadRecording(
    const std::string& json_path);

// Appends one FINISHED sweep named `name` of the recorded trials to the
// database at `db_path` (created if needed); returns its id.
absl::StatusOr<int64_t> WriteRecordedSweep(
    const v1::QueryTrialsResponse& recording, const std::string& db_path,
    const std::string& name);

// The same, from the recording's file.
absl::StatusOr<int64_t> WriteRecordedSweep(const std::string& json_path,
                                           const std::string& db_path,
                                           const std::string& name);

}  // namespace moetune::e2e
