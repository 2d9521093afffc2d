#include "coordinator/cli/progress_display.h"

namespace moetune::cli {
namespace {
constexpr char kClearLine[] = "\r\x1b[K";
}  // namespace

ProgressDisplay::ProgressDisplay(std::ostream* out, bool terminal,
                                 const Clock* clock)
    : out_(out),
      terminal_(terminal),
      clock_(clock),
      tracker_(clock->NowUnixMs()) {}

void ProgressDisplay::OnEvent(const v1::SweepEvent& event) {
  absl::MutexLock lock(&mu_);
  const bool counted = tracker_.OnEvent(event);
  const int64_t now = clock_->NowUnixMs();
  if (!terminal_) {
    if (counted) {
      *out_ << tracker_.TrialLine(event.trial(), now) << std::endl;
    }
    return;
  }
  const v1::TrialState state = event.trial().state();
  if (counted &&
      (state == v1::FAILED || state == v1::INCORRECT || state == v1::TIMEOUT)) {
    // A failure stays on the screen; the rest only move the counter
    // (unavailable backends are listed, with why, after the table).
    *out_ << kClearLine << tracker_.TrialLine(event.trial(), now) << "\n";
    drawn_ = false;
  }
  Redraw();
}

void ProgressDisplay::Tick() {
  absl::MutexLock lock(&mu_);
  if (terminal_ && drawn_) Redraw();
}

void ProgressDisplay::Note(const std::string& line) {
  absl::MutexLock lock(&mu_);
  if (!terminal_) {
    *out_ << line << std::endl;
    return;
  }
  *out_ << kClearLine << line << "\n";
  if (drawn_) Redraw();
}

void ProgressDisplay::Finish() {
  absl::MutexLock lock(&mu_);
  if (terminal_ && drawn_) *out_ << "\n" << std::flush;
  drawn_ = false;
}

void ProgressDisplay::Redraw() {
  *out_ << kClearLine << tracker_.Status(clock_->NowUnixMs()) << std::flush;
  drawn_ = true;
}

}  // namespace moetune::cli
