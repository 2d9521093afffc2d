// Progress of a sweep as `moetune sweep` shows it while it runs: trials
// finished of the total, running, failed, elapsed time and an estimate of
// the time left. The tracker counts each trial once, by its id, from the
// WatchSweep stream (which replays the trials already final), so two trials
// finishing together never print the same counter. Pure (time is passed in);
// not thread-safe.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "proto/moetune.pb.h"

namespace moetune::cli {

class ProgressTracker {
 public:
  explicit ProgressTracker(int64_t start_ms) : start_ms_(start_ms) {}

  // Returns true when the event brought a trial not counted before.
  bool OnEvent(const v1::SweepEvent& event);

  int done() const { return static_cast<int>(finished_.size()); }
  int failed() const { return failed_; }
  int running() const { return running_; }
  int total() const { return total_; }

  // "[5/12] running 2, failed 1, elapsed 12s, ETA 17s": the ETA is the time
  // per trial that ran (not unavailable or cancelled) times the trials left;
  // "?" until one has finished while watching.
  std::string Status(int64_t now_ms) const;
  // One plain line for a finished trial: its config, state and median, then
  // Status(now_ms) in parentheses (for output that is not a terminal).
  std::string TrialLine(const v1::Trial& trial, int64_t now_ms) const;

 private:
  int64_t start_ms_;
  std::set<int64_t> finished_;
  int done_at_start_ = -1;  // finished before the first snapshot was read
  int ran_ = 0;             // finished trials that ran (the rate of the ETA)
  int failed_ = 0;
  int running_ = 0;
  int total_ = 0;
};

// "45s", "3m05s", "2h03m".
std::string FormatDuration(int64_t ms);

}  // namespace moetune::cli
