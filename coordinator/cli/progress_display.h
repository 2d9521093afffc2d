// Shows a ProgressTracker on a stream: on a terminal one status line redrawn
// in place (carriage return, clear to the end of the line; failures printed
// above it as they happen; Tick() keeps elapsed/ETA moving between events),
// otherwise one plain line per finished trial, so that logs and pipes get
// no control characters. Thread-safe: OnEvent, Tick and Note may race.
#pragma once

#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/cli/progress.h"

namespace moetune::cli {

class ProgressDisplay {
 public:
  ProgressDisplay(std::ostream* out, bool terminal, const Clock* clock);

  void OnEvent(const v1::SweepEvent& event);
  // Redraws the status line (a terminal only).
  void Tick();
  // A line of its own, such as a worker's exit: above the status line on a
  // terminal (which is then redrawn), as it is otherwise.
  void Note(const std::string& line);
  // Ends the status line (a terminal only).
  void Finish();

 private:
  void Redraw() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::ostream* out_;
  const bool terminal_;
  const Clock* clock_;
  absl::Mutex mu_;
  ProgressTracker tracker_ ABSL_GUARDED_BY(mu_);
  bool drawn_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace moetune::cli
