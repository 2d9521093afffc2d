#include "coordinator/cli/progress.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/cli/table.h"
#include "coordinator/cli/views.h"

namespace moetune::cli {
namespace {

bool IsFailure(v1::TrialState state) {
  return state == v1::FAILED || state == v1::INCORRECT || state == v1::TIMEOUT;
}

int CountOf(const v1::Sweep& sweep, const char* state) {
  const auto it = sweep.trial_counts().find(state);
  return it == sweep.trial_counts().end() ? 0 : it->second;
}

}  // namespace

std::string FormatDuration(int64_t ms) {
  const int64_t s = std::max<int64_t>(0, (ms + 500) / 1000);
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

bool ProgressTracker::OnEvent(const v1::SweepEvent& event) {
  if (event.has_progress()) {
    total_ = event.progress().total_trials();
    running_ = CountOf(event.progress(), "LEASED");
  }
  if (!event.has_trial()) {
    // The stream's first event is a snapshot; the trials final by then are
    // replayed after it and count toward done, not toward the rate.
    if (done_at_start_ < 0 && event.has_progress()) {
      done_at_start_ = total_ - CountOf(event.progress(), "QUEUED") - running_;
    }
    return false;
  }
  if (!finished_.insert(event.trial().trial_id()).second) return false;
  const v1::TrialState state = event.trial().state();
  if (IsFailure(state)) ++failed_;
  // Unavailable and cancelled trials end at once: they say nothing about
  // how long the rest will take.
  if (state != v1::UNAVAILABLE && state != v1::CANCELLED) ++ran_;
  return true;
}

std::string ProgressTracker::Status(int64_t now_ms) const {
  const int64_t elapsed = now_ms - start_ms_;
  const int since_start = std::max(0, ran_ - std::max(0, done_at_start_));
  std::string eta = "?";
  if (done() >= total_ && total_ > 0) {
    eta = "0s";
  } else if (since_start > 0 && elapsed > 0) {
    eta = FormatDuration(elapsed * (total_ - done()) / since_start);
  }
  return absl::StrCat("[", done(), "/", total_, "] running ", running_,
                      ", failed ", failed_, ", elapsed ",
                      FormatDuration(elapsed), ", ETA ", eta);
}

std::string ProgressTracker::TrialLine(const v1::Trial& t,
                                       int64_t now_ms) const {
  std::string line = absl::StrCat(
      "trial ", t.trial_id(), " ", ConfigCells(t.config()), " batch ",
      t.workload().batch_size(), ": ", v1::TrialState_Name(t.state()));
  if (t.state() == v1::DONE) {
    absl::StrAppend(&line, " ", FormatDouble(t.result().stats().median_us()),
                    " us");
  } else {
    const std::string& reason =
        t.reason().empty() ? t.result().reason() : t.reason();
    if (!reason.empty()) absl::StrAppend(&line, " (", reason, ")");
  }
  return absl::StrCat(line, "  ", Status(now_ms));
}

}  // namespace moetune::cli
