#include "coordinator/cli/time_account.h"

#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::cli {
namespace {

v1::Sweep SweepOf(double wall_s) {
  v1::Sweep sweep;
  sweep.set_created_at_unix_ms(1'000'000);
  sweep.set_finished_at_unix_ms(1'000'000 + static_cast<int64_t>(wall_s * 1e3));
  return sweep;
}

void AddTrial(v1::QueryTrialsResponse* trials, const std::string& worker,
              double check_s, double timed_s) {
  v1::Trial* trial = trials->add_trials();
  trial->set_worker_id(worker);
  trial->mutable_result()->set_check_s(check_s);
  trial->mutable_result()->set_timed_s(timed_s);
}

// The account of a 10 s sweep whose trials recorded their phases.
TimeAccount TenSecondAccount(const v1::QueryTrialsResponse& trials) {
  const TimeAccount account = AccountTime(SweepOf(10), trials);
  EXPECT_TRUE(account.recorded());
  return account;
}

// 10 s of one worker, 2 s checking and 5 s timing: 30 % went elsewhere; the
// same trials on two workers had 20 s between them: 65 %.
TEST(TimeAccountTest, TheShareOutsideIsOfEveryWorkersTime) {
  for (const auto& [second_worker, workers, outside] :
       {std::tuple{"w1", 1, 0.3}, std::tuple{"w2", 2, 0.65}}) {
    v1::QueryTrialsResponse trials;
    AddTrial(&trials, "w1", 1.5, 4.0);
    AddTrial(&trials, second_worker, 0.5, 1.0);
    const TimeAccount a = TenSecondAccount(trials);
    EXPECT_EQ(a.workers, workers);
    EXPECT_DOUBLE_EQ(a.check_s, 2.0);
    EXPECT_DOUBLE_EQ(a.timed_s, 5.0);
    EXPECT_NEAR(a.OutsideShare(), outside, 1e-12);
  }
}

TEST(TimeAccountTest, OneLineSaysWhereTheTimeWent) {
  v1::QueryTrialsResponse trials;
  AddTrial(&trials, "w1", 2.0, 5.0);
  EXPECT_EQ(TimeAccountLine(SweepOf(10), trials),
            "time: 10.0 s on 1 worker: checks 2.0 s, warm-ups and timed "
            "iterations 5.0 s; 30% outside them (setup, scheduling, "
            "reports)");
  AddTrial(&trials, "w2", 0, 1.0);
  EXPECT_THAT(TimeAccountLine(SweepOf(10), trials),
              ::testing::HasSubstr("on 2 workers:"));
}

// Results without check_s and timed_s, or a sweep without an end:
// nothing is claimed.
TEST(TimeAccountTest, SaysNothingWithoutRecordedPhases) {
  v1::QueryTrialsResponse trials;
  AddTrial(&trials, "w1", 0, 0);
  EXPECT_FALSE(AccountTime(SweepOf(10), trials).recorded());
  EXPECT_EQ(TimeAccountLine(SweepOf(10), trials), "");
  AddTrial(&trials, "w1", 1, 1);
  EXPECT_EQ(TimeAccountLine(v1::Sweep(), trials), "");
}

}  // namespace
}  // namespace moetune::cli
