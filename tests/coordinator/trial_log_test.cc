#include "coordinator/trial_log.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::coordinator {
namespace {

using ::testing::HasSubstr;

TEST(TrialLogTest, OneLineWithTrialConfigStateMedianAndReason) {
  v1::Trial trial;
  trial.set_trial_id(12);
  trial.set_sweep_id(3);
  trial.mutable_config()->set_moe_backend("cpu_blocked");
  trial.mutable_config()->mutable_tile()->set_block_n(8);
  trial.mutable_config()->mutable_tile()->set_block_k(128);
  trial.mutable_config()->set_tp(1);
  trial.mutable_config()->set_ep(2);
  trial.mutable_workload()->set_batch_size(4);
  v1::TrialResult result;
  result.mutable_stats()->set_samples(20);
  result.mutable_stats()->set_median_us(123.5);
  result.set_worker_id("w-1");
  const std::string done =
      FormatLogLine(LogLevel::kInfo, LogFormat::kText, 0, "trial finished",
                    TrialOutcomeFields(trial, v1::DONE, &result, ""));
  EXPECT_THAT(done, HasSubstr("trial finished trial=12 sweep=3 state=DONE "
                              "config=\"cpu_blocked 8x128 tp1 ep2\" batch=4"));
  EXPECT_THAT(done, HasSubstr("median_us=123.5"));
  EXPECT_THAT(done, HasSubstr("worker=w-1"));
  const std::string failed = FormatLogLine(
      LogLevel::kWarning, LogFormat::kText, 0, "trial finished",
      TrialOutcomeFields(trial, v1::FAILED, nullptr, "worker w-1 went silent"));
  EXPECT_THAT(failed, HasSubstr("state=FAILED"));
  EXPECT_THAT(failed, HasSubstr("reason=\"worker w-1 went silent\""));
  EXPECT_THAT(failed, ::testing::Not(HasSubstr("median_us")));
}

TEST(TrialLogTest, TheConfigNamesDataParallelAttention) {
  v1::Trial trial;
  trial.mutable_config()->set_moe_backend("fused_gemv");
  trial.mutable_config()->mutable_tile()->set_block_n(32);
  trial.mutable_config()->mutable_tile()->set_block_k(256);
  trial.mutable_config()->set_tp(8);
  trial.mutable_config()->set_ep(1);
  trial.mutable_config()->set_cuda_graph(true);
  trial.mutable_config()->set_attention_split(v1::ATTENTION_DP);
  const std::string line =
      FormatLogLine(LogLevel::kInfo, LogFormat::kText, 0, "trial finished",
                    TrialOutcomeFields(trial, v1::DONE, nullptr, ""));
  EXPECT_THAT(line, HasSubstr("config=\"fused_gemv 32x256 tp8 ep1 dp-attn "
                              "graph\""));
}

}  // namespace
}  // namespace moetune::coordinator
