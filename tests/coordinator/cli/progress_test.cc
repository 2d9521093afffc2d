#include "coordinator/cli/progress.h"

#include <sstream>

#include "coordinator/cli/progress_display.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::cli {
namespace {

using ::testing::HasSubstr;

v1::SweepEvent Snapshot(int total, int queued, int leased) {
  v1::SweepEvent event;
  event.mutable_progress()->set_total_trials(total);
  (*event.mutable_progress()->mutable_trial_counts())["QUEUED"] = queued;
  (*event.mutable_progress()->mutable_trial_counts())["LEASED"] = leased;
  return event;
}

v1::SweepEvent Finished(v1::SweepEvent snapshot, int64_t id,
                        v1::TrialState state) {
  snapshot.mutable_trial()->set_trial_id(id);
  snapshot.mutable_trial()->set_state(state);
  return snapshot;
}

TEST(ProgressTrackerTest, CountsEachTrialOnceEvenWithOneSnapshot) {
  ProgressTracker tracker(0);
  tracker.OnEvent(Snapshot(4, 4, 0));
  // Two trials of one round carry the same snapshot: still 1, then 2.
  const v1::SweepEvent round = Snapshot(4, 0, 2);
  EXPECT_TRUE(tracker.OnEvent(Finished(round, 1, v1::DONE)));
  EXPECT_EQ(tracker.done(), 1);
  EXPECT_TRUE(tracker.OnEvent(Finished(round, 2, v1::FAILED)));
  EXPECT_EQ(tracker.done(), 2);
  EXPECT_FALSE(tracker.OnEvent(Finished(round, 2, v1::FAILED)));  // replayed
  EXPECT_EQ(tracker.done(), 2);
  EXPECT_EQ(tracker.failed(), 1);
  EXPECT_EQ(tracker.running(), 2);
  // 2 done in 10 s, 2 to go: about 10 s left.
  EXPECT_EQ(tracker.Status(10000),
            "[2/4] running 2, failed 1, elapsed 10s, ETA 10s");
}

TEST(ProgressTrackerTest, EtaIgnoresTrialsFinishedBeforeWatching) {
  ProgressTracker tracker(0);
  tracker.OnEvent(Snapshot(10, 5, 0));  // 5 were final already
  for (int id = 1; id <= 5; ++id) {
    tracker.OnEvent(Finished(Snapshot(10, 5, 0), id, v1::DONE));
  }
  EXPECT_THAT(tracker.Status(60000), HasSubstr("[5/10]"));
  EXPECT_THAT(tracker.Status(60000), HasSubstr("ETA ?"));
  tracker.OnEvent(Finished(Snapshot(10, 4, 0), 6, v1::DONE));
  EXPECT_THAT(tracker.Status(60000), HasSubstr("elapsed 1m00s, ETA 4m00s"));
}

TEST(ProgressTrackerTest, DurationsReadNaturally) {
  EXPECT_EQ(FormatDuration(45'000), "45s");
  EXPECT_EQ(FormatDuration(185'000), "3m05s");
  EXPECT_EQ(FormatDuration(7'380'000), "2h03m");
}

TEST(ProgressDisplayTest, PlainLinesWhenNotATerminal) {
  FakeClock clock(1000);
  std::ostringstream out;
  ProgressDisplay display(&out, /*terminal=*/false, &clock);
  display.OnEvent(Snapshot(2, 2, 0));
  clock.AdvanceMs(2000);
  v1::SweepEvent done = Finished(Snapshot(2, 0, 1), 7, v1::DONE);
  done.mutable_trial()->mutable_config()->set_moe_backend("cpu_blocked");
  display.OnEvent(done);
  display.Tick();
  display.Finish();
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
  EXPECT_THAT(out.str(), HasSubstr("trial 7 cpu_blocked"));
  EXPECT_THAT(out.str(), HasSubstr("[1/2] running 1, failed 0, elapsed 2s"));
}

TEST(ProgressDisplayTest, OneLineRedrawnInPlaceOnATerminal) {
  FakeClock clock(0);
  std::ostringstream out;
  ProgressDisplay display(&out, /*terminal=*/true, &clock);
  display.OnEvent(Snapshot(2, 1, 1));
  clock.AdvanceMs(3000);
  display.Tick();
  display.Finish();
  EXPECT_EQ(out.str(),
            "\r\x1b[K[0/2] running 1, failed 0, elapsed 0s, ETA ?"
            "\r\x1b[K[0/2] running 1, failed 0, elapsed 3s, ETA ?\n");
}

TEST(ProgressDisplayTest, OnATerminalOnlyFailuresStayAboveTheLine) {
  FakeClock clock(0);
  std::ostringstream out;
  ProgressDisplay display(&out, /*terminal=*/true, &clock);
  display.OnEvent(Snapshot(3, 3, 0));
  display.OnEvent(Finished(Snapshot(3, 0, 0), 1, v1::UNAVAILABLE));
  display.OnEvent(Finished(Snapshot(3, 0, 0), 2, v1::DONE));
  display.OnEvent(Finished(Snapshot(3, 0, 0), 3, v1::INCORRECT));
  display.Finish();
  EXPECT_EQ(out.str().find("trial 1 "), std::string::npos);
  EXPECT_EQ(out.str().find("trial 2 "), std::string::npos);
  EXPECT_THAT(out.str(), HasSubstr("\r\x1b[Ktrial 3 "));
  EXPECT_THAT(out.str(), HasSubstr("INCORRECT"));
}

TEST(ProgressDisplayTest, NotesGoAboveTheLineOnATerminal) {
  FakeClock clock(0);
  std::ostringstream terminal;
  ProgressDisplay display(&terminal, /*terminal=*/true, &clock);
  display.OnEvent(Snapshot(2, 2, 0));
  display.Note("moetune: worker local:1 exited (exit code 2)");
  EXPECT_EQ(terminal.str(),
            "\r\x1b[K[0/2] running 0, failed 0, elapsed 0s, ETA ?"
            "\r\x1b[Kmoetune: worker local:1 exited (exit code 2)\n"
            "\r\x1b[K[0/2] running 0, failed 0, elapsed 0s, ETA ?");
  std::ostringstream plain;
  ProgressDisplay lines(&plain, /*terminal=*/false, &clock);
  lines.Note("moetune: worker local:1 exited (exit code 2)");
  EXPECT_EQ(plain.str(), "moetune: worker local:1 exited (exit code 2)\n");
}

TEST(ProgressTrackerTest, UnavailableTrialsDoNotSpeedUpTheEta) {
  ProgressTracker tracker(0);
  tracker.OnEvent(Snapshot(5, 5, 0));
  tracker.OnEvent(Finished(Snapshot(5, 2, 1), 1, v1::UNAVAILABLE));
  tracker.OnEvent(Finished(Snapshot(5, 2, 1), 2, v1::UNAVAILABLE));
  tracker.OnEvent(Finished(Snapshot(5, 2, 0), 3, v1::DONE));
  // One trial ran in 10 s and two are left: 20 s, not 2 x 10 / 3.
  EXPECT_THAT(tracker.Status(10000), HasSubstr("[3/5]"));
  EXPECT_THAT(tracker.Status(10000), HasSubstr("ETA 20s"));
}

}  // namespace
}  // namespace moetune::cli
