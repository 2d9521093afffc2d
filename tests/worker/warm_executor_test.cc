// WarmProcessExecutor with the real worker binary serving CPU trials.
#include <string>

#include "gtest/gtest.h"
#include "tests/worker/tiny_moe_trial.h"
#include "worker/trial_executor.h"

namespace moetune::worker {
namespace {

v1::TrialExecution CpuTrial(int64_t id, const std::string& backend, int batch) {
  return testing::TinyMoeTrial(id, backend, batch, /*seed=*/5);
}

WarmProcessExecutor Executor() {
  return WarmProcessExecutor(
      {MOETUNE_WORKER_BINARY, "--serve_trials", "--device=cpu"},
      {MOETUNE_WORKER_BINARY, "--run_trial", "--device=cpu"});
}

TEST(WarmProcessExecutorTest, TrialsOfOneModelShareAWarmProcess) {
  WarmProcessExecutor executor = Executor();
  for (int i = 0; i < 3; ++i) {
    const v1::TrialResult r =
        executor.Execute(CpuTrial(i + 1, "cpu_reference", 2), nullptr);
    ASSERT_EQ(r.outcome(), v1::DONE) << r.reason();
    EXPECT_EQ(r.trial_id(), i + 1);
    EXPECT_EQ(r.process_trials(), i);
    EXPECT_GT(r.wall_s(), 0);
  }
  // Another batch of the same model keeps the process; another seed (other
  // weights) starts a fresh one.
  const v1::TrialResult other_batch =
      executor.Execute(CpuTrial(9, "cpu_reference", 4), nullptr);
  ASSERT_EQ(other_batch.outcome(), v1::DONE) << other_batch.reason();
  EXPECT_EQ(other_batch.process_trials(), 3);
  v1::TrialExecution reseeded = CpuTrial(10, "cpu_reference", 4);
  reseeded.mutable_trial()->mutable_workload()->set_seed(6);
  const v1::TrialResult other = executor.Execute(reseeded, nullptr);
  ASSERT_EQ(other.outcome(), v1::DONE) << other.reason();
  EXPECT_EQ(other.process_trials(), 0);
}

TEST(WarmProcessExecutorTest, AFailedTrialRetiresItsProcess) {
  WarmProcessExecutor executor = Executor();
  ASSERT_EQ(
      executor.Execute(CpuTrial(1, "cpu_reference", 2), nullptr).outcome(),
      v1::DONE);
  const v1::TrialResult failed =
      executor.Execute(CpuTrial(2, "warp_drive", 2), nullptr);
  EXPECT_EQ(failed.outcome(), v1::FAILED);
  EXPECT_EQ(failed.process_trials(), 1);
  const v1::TrialResult next =
      executor.Execute(CpuTrial(3, "cpu_reference", 2), nullptr);
  ASSERT_EQ(next.outcome(), v1::DONE) << next.reason();
  EXPECT_EQ(next.process_trials(), 0);  // started clean
}

// A gang trial runs in a fresh process of its own, and the warm one is
// retired first (NCCL communicators and IPC mappings are per process and
// per gang). On a CPU worker it is refused, saying why.
TEST(WarmProcessExecutorTest, AGangTrialRunsInAFreshProcess) {
  WarmProcessExecutor executor = Executor();
  ASSERT_EQ(
      executor.Execute(CpuTrial(1, "cpu_reference", 2), nullptr).outcome(),
      v1::DONE);
  v1::TrialExecution gang = CpuTrial(2, "cpu_reference", 2);
  gang.mutable_trial()->mutable_config()->set_tp(2);
  gang.mutable_trial()->mutable_config()->set_communication(v1::MEASURED);
  gang.mutable_gang()->set_gang_id("trial-2-attempt-1");
  gang.mutable_gang()->set_world_size(2);
  gang.set_coordinator_address("127.0.0.1:1");
  const v1::TrialResult refused = executor.Execute(gang, nullptr);
  EXPECT_EQ(refused.outcome(), v1::FAILED);
  EXPECT_NE(refused.reason().find(
                "MEASURED communication needs GPU workers with NCCL"),
            std::string::npos)
      << refused.reason();
  EXPECT_EQ(refused.process_trials(), 0);
  const v1::TrialResult next =
      executor.Execute(CpuTrial(3, "cpu_reference", 2), nullptr);
  ASSERT_EQ(next.outcome(), v1::DONE) << next.reason();
  EXPECT_EQ(next.process_trials(), 0);  // the warm one was retired
}

TEST(WarmProcessExecutorTest, ADeadProcessIsAFailedTrialNamingWhy) {
  WarmProcessExecutor executor(
      {"/bin/sh", "-c", "echo 'no such luck' >&2; exit 4"}, {"/bin/false"});
  const v1::TrialResult r =
      executor.Execute(CpuTrial(1, "cpu_reference", 2), nullptr);
  EXPECT_EQ(r.outcome(), v1::FAILED);
  EXPECT_NE(r.reason().find("exited with status 4"), std::string::npos)
      << r.reason();
  EXPECT_NE(r.reason().find("no such luck"), std::string::npos) << r.reason();
}

}  // namespace
}  // namespace moetune::worker
