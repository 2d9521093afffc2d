// The coordinator's one log line per trial outcome: trial, sweep, config,
// workload, state, median (when timed), worker and reason, as fields, so that
// an operator can follow a sweep in the daemon's log (or a collector can
// index it with --log_format json) without querying the database.
// Thread-safe (LogLine is).
#pragma once

#include <string>

#include "common/log.h"
#include "proto/moetune.pb.h"

namespace moetune::coordinator {

// The fields of the line for `trial` reaching `state` (with `result` when a
// worker reported one, else null; `reason` when not DONE).
std::vector<LogField> TrialOutcomeFields(const v1::Trial& trial,
                                         v1::TrialState state,
                                         const v1::TrialResult* result,
                                         const std::string& reason);

// Logs it: WARNING for FAILED, INCORRECT and TIMEOUT, INFO otherwise.
void LogTrialOutcome(const v1::Trial& trial, v1::TrialState state,
                     const v1::TrialResult* result, const std::string& reason);

}  // namespace moetune::coordinator
