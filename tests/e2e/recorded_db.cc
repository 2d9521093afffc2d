#include "tests/e2e/recorded_db.h"

#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "db/store.h"
#include "google/protobuf/util/json_util.h"
#include "proto/moetune.pb.h"

namespace moetune::e2e {
namespace {

// The trial's recorded end: its result under a lease, or a final state
// without one (UNAVAILABLE, FAILED before running).
absl::Status Replay(db::Store& store, const v1::Trial& recorded,
                    int64_t trial_id, int64_t now_ms) {
  if (recorded.has_result()) {
    RETURN_IF_ERROR(store.LeaseTrial(trial_id, recorded.worker_id(), now_ms));
    v1::TrialResult result = recorded.result();
    result.set_trial_id(trial_id);
    result.set_attempt(1);
    return store.RecordResult(result, now_ms).status();
  }
  const v1::TrialState state =
      recorded.state() == v1::DONE ? v1::FAILED : recorded.state();
  return store.FinishTrial(trial_id, state, recorded.reason(), now_ms);
}

}  // namespace

absl::StatusOr<v1::QueryTrialsResponse> ReadRecording(
    const std::string& json_path) {
  std::ifstream in(json_path);
  if (!in) return absl::NotFoundError(json_path + ": cannot be read");
  const std::string json{std::istreambuf_iterator<char>(in), {}};
  v1::QueryTrialsResponse recording;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(json, &recording, options)
           .ok()) {
    return absl::InvalidArgumentError(json_path + ": not a recorded sweep");
  }
  return recording;
}

absl::StatusOr<int64_t> WriteRecordedSweep(const std::string& json_path,
                                           const std::string& db_path,
                                           const std::string& name) {
  ASSIGN_OR_RETURN(const v1::QueryTrialsResponse recording,
                   ReadRecording(json_path));
  return WriteRecordedSweep(recording, db_path, name);
}

absl::StatusOr<int64_t> WriteRecordedSweep(
    const v1::QueryTrialsResponse& recording, const std::string& db_path,
    const std::string& name) {
  ASSIGN_OR_RETURN(std::unique_ptr<db::Store> store, db::Store::Open(db_path));
  v1::SweepSpec spec;
  spec.set_name(name);
  std::vector<v1::Trial> trials;
  for (const v1::Trial& recorded : recording.trials()) {
    v1::Trial& trial = trials.emplace_back();
    *trial.mutable_workload() = recorded.workload();
    *trial.mutable_config() = recorded.config();
    trial.set_workload_hash(
        recorded.workload_hash().empty()
            ? absl::StrCat("w", recorded.workload().batch_size(), "c",
                           recorded.workload().context_length())
            : recorded.workload_hash());
    *trial.mutable_measurement() = recorded.measurement();
    trial.set_rung(recorded.rung());
  }
  const int64_t now_ms = recording.trials_size() > 0
                             ? recording.trials(0).updated_at_unix_ms()
                             : 0;
  ASSIGN_OR_RETURN(const int64_t sweep_id,
                   store->CreateSweep(spec, &trials, now_ms));
  for (int i = 0; i < recording.trials_size(); ++i) {
    RETURN_IF_ERROR(
        Replay(*store, recording.trials(i), trials[i].trial_id(), now_ms));
  }
  RETURN_IF_ERROR(store->SetSweepState(sweep_id, v1::FINISHED, now_ms));
  return sweep_id;
}

}  // namespace moetune::e2e
