#include "coordinator/trial_log.h"

#include "tuner/config_key.h"

namespace moetune::coordinator {

std::vector<LogField> TrialOutcomeFields(const v1::Trial& trial,
                                         v1::TrialState state,
                                         const v1::TrialResult* result,
                                         const std::string& reason) {
  std::vector<LogField> fields = {
      {"trial", trial.trial_id()},
      {"sweep", trial.sweep_id()},
      {"state", v1::TrialState_Name(state)},
      {"config", tuner::ConfigText(trial.config())},
      {"batch", trial.workload().batch_size()},
      {"context", trial.workload().context_length()}};
  if (result != nullptr && result->stats().samples() > 0) {
    fields.emplace_back("median_us", result->stats().median_us());
    fields.emplace_back("ci_low_us", result->stats().ci_low_us());
    fields.emplace_back("ci_high_us", result->stats().ci_high_us());
    fields.emplace_back("efficiency", result->roofline().efficiency());
  }
  if (result != nullptr && !result->worker_id().empty()) {
    fields.emplace_back("worker", result->worker_id());
  }
  if (state != v1::DONE && !reason.empty()) {
    fields.emplace_back("reason", reason);
  }
  return fields;
}

void LogTrialOutcome(const v1::Trial& trial, v1::TrialState state,
                     const v1::TrialResult* result, const std::string& reason) {
  const bool failed =
      state == v1::FAILED || state == v1::INCORRECT || state == v1::TIMEOUT;
  LogLine(failed ? LogLevel::kWarning : LogLevel::kInfo, "trial finished",
          TrialOutcomeFields(trial, state, result, reason));
}

}  // namespace moetune::coordinator
