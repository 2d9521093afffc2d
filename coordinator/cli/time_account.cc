#include "coordinator/cli/time_account.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_format.h"

namespace moetune::cli {

double TimeAccount::OutsideShare() const {
  const double available = wall_s * workers;
  if (available <= 0) return 0;
  return std::clamp(1.0 - (check_s + timed_s) / available, 0.0, 1.0);
}

TimeAccount AccountTime(const v1::Sweep& sweep,
                        const v1::QueryTrialsResponse& trials) {
  TimeAccount account;
  std::set<std::string> workers;
  for (const v1::Trial& trial : trials.trials()) {
    if (!trial.has_result()) continue;
    const v1::TrialResult& result = trial.result();
    const std::string& worker =
        result.worker_id().empty() ? trial.worker_id() : result.worker_id();
    if (!worker.empty()) workers.insert(worker);
    account.check_s += result.check_s();
    account.timed_s += result.timed_s();
  }
  account.workers = static_cast<int>(workers.size());
  if (sweep.finished_at_unix_ms() > sweep.created_at_unix_ms()) {
    account.wall_s =
        (sweep.finished_at_unix_ms() - sweep.created_at_unix_ms()) / 1000.0;
  }
  return account;
}

std::string TimeAccountLine(const v1::Sweep& sweep,
                            const v1::QueryTrialsResponse& trials) {
  const TimeAccount a = AccountTime(sweep, trials);
  if (!a.recorded() || a.wall_s <= 0 || a.workers == 0) return "";
  return absl::StrFormat(
      "time: %.1f s on %d worker%s: checks %.1f s, warm-ups and timed "
      "iterations %.1f s; %.0f%% outside them (setup, scheduling, reports)",
      a.wall_s, a.workers, a.workers == 1 ? "" : "s", a.check_s, a.timed_s,
      100.0 * a.OutsideShare());
}

}  // namespace moetune::cli
