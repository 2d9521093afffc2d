// The metrics' names, labels and arithmetic from a fake snapshot: what a
// Prometheus scrape sees.
#include "coordinator/http/metrics.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/http/fake_metrics_source.h"

namespace moetune::coordinator::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using FakeSource = testing::FakeMetricsSource;

class FakeProcess final : public ProcessStatsSource {
 public:
  absl::StatusOr<ProcessStats> Read() override { return stats; }
  ProcessStats stats;
};

WorkloadBest Best(const std::string& backend, double median_s) {
  return testing::H200Best(backend, median_s);
}

TEST(MetricsTest, ScrapeReportsTheSnapshot) {
  FakeSource source;
  source.snapshot.trials_by_state = {{"DONE", 5}, {"QUEUED", 2}};
  source.snapshot.queue_depth = 2;
  source.snapshot.finished_total = 5;
  source.snapshot.finished_last_minute = 30;
  source.snapshot.workers_known = 3;
  source.snapshot.workers_alive = 2;
  source.snapshot.bests = {Best("fused_gemv", 335e-6)};
  CoordinatorMetrics metrics;
  metrics.SetSource(&source);
  const std::string text = *metrics.Scrape();
  EXPECT_THAT(text, HasSubstr("moetune_trials{state=\"DONE\"} 5"));
  EXPECT_THAT(text, HasSubstr("moetune_trials{state=\"TIMEOUT\"} 0"));
  EXPECT_THAT(text, HasSubstr("moetune_queue_depth 2"));
  EXPECT_THAT(text, HasSubstr("moetune_workers 3"));
  EXPECT_THAT(text, HasSubstr("moetune_workers_alive 2"));
  EXPECT_THAT(text, HasSubstr("moetune_trials_finished_total 5"));
  EXPECT_THAT(text, HasSubstr("moetune_trials_per_second 0.5"));
  EXPECT_THAT(text, HasSubstr("# TYPE moetune_trials_finished_total counter"));
  EXPECT_THAT(text, HasSubstr("moetune_best_median_seconds{backend=\"fused_gemv"
                              "\",batch=\"8\",context=\"2048\""));
  EXPECT_THAT(text, HasSubstr("moetune_best_efficiency_ratio{"));
}

// Series stay the same across nights: keyed by workload and a readable
// device name, never by the sweep or the fingerprint's hash.
TEST(MetricsTest, BestSeriesAreKeyedByWorkloadAndDevice) {
  FakeSource source;
  source.snapshot.bests = {Best("fused_gemv", 335e-6)};
  CoordinatorMetrics metrics;
  metrics.SetSource(&source);
  const std::string text = *metrics.Scrape();
  EXPECT_THAT(text, HasSubstr("context=\"2048\",device=\"NVIDIA H200\","
                              "model_preset=\"glm5\",region=\"MOE_LAYER\","
                              "workload_hash=\"abc\"} 0.000335"));
  EXPECT_THAT(text, Not(HasSubstr("sweep_id=")));
  EXPECT_THAT(text, Not(HasSubstr("fingerprint=")));
}

TEST(MetricsTest, BuildInfoNamesVersionAndCommit) {
  const std::string text = *CoordinatorMetrics().Scrape();
  EXPECT_THAT(
      text, HasSubstr(absl::StrCat("moetune_build_info{commit=\"", BuildHash(),
                                   "\",version=\"", Version(), "\"} 1")));
}

TEST(MetricsTest, ProcessSeriesComeFromTheProcessSource) {
  auto process = std::make_unique<FakeProcess>();
  process->stats = {.start_time_seconds = 1700000000,
                    .resident_memory_bytes = 4096,
                    .open_fds = 12};
  CoordinatorMetrics metrics(std::move(process));
  const std::string text = *metrics.Scrape();
  EXPECT_THAT(text, HasSubstr("process_start_time_seconds 1700000000"));
  EXPECT_THAT(text, HasSubstr("process_resident_memory_bytes 4096"));
  EXPECT_THAT(text, HasSubstr("process_open_fds 12"));
}

TEST(MetricsTest, TrialsFillTheDurationHistogramAndBusyTime) {
  CoordinatorMetrics metrics(nullptr);
  metrics.ObserveTrial("gpu-host:0", 2.5);
  metrics.ObserveTrial("gpu-host:0", 40);
  metrics.ObserveTrial("gpu-host:1", 0.2);
  const std::string text = *metrics.Scrape();
  EXPECT_THAT(text, HasSubstr("moetune_trial_duration_seconds_count 3"));
  EXPECT_THAT(text, HasSubstr("moetune_trial_duration_seconds_bucket{le=\"3\"}"
                              " 2"));
  EXPECT_THAT(text, HasSubstr("moetune_trial_duration_seconds_sum 42.7"));
  EXPECT_THAT(text, HasSubstr("moetune_worker_busy_seconds_total{worker=\""
                              "gpu-host:0\"} 42.5"));
  EXPECT_THAT(text, HasSubstr("moetune_worker_busy_seconds_total{worker=\""
                              "gpu-host:1\"} 0.2"));
}

TEST(MetricsTest, FinishedCounterOnlyGoesUp) {
  FakeSource source;
  CoordinatorMetrics metrics;
  metrics.SetSource(&source);
  source.snapshot.finished_total = 10;
  ASSERT_TRUE(metrics.Scrape().ok());
  source.snapshot.finished_total = 12;
  EXPECT_THAT(*metrics.Scrape(), HasSubstr("moetune_trials_finished_total 12"));
}

TEST(MetricsTest, AWorkloadsOldWinnerSeriesIsDropped) {
  FakeSource source;
  CoordinatorMetrics metrics;
  metrics.SetSource(&source);
  source.snapshot.bests = {Best("grouped_mma", 400e-6)};
  ASSERT_THAT(*metrics.Scrape(), HasSubstr("backend=\"grouped_mma\""));
  source.snapshot.bests = {Best("fused_gemv", 335e-6)};
  const std::string text = *metrics.Scrape();
  EXPECT_THAT(text, HasSubstr("backend=\"fused_gemv\""));
  EXPECT_THAT(text, Not(HasSubstr("backend=\"grouped_mma\"")));
}

TEST(MetricsTest, RpcLatencyIsLabelledByServiceMethodAndCode) {
  CoordinatorMetrics metrics;
  metrics.ObserveRpc("/moetune.v1.Moetune/GetSweep", "OK", 0.002);
  const std::string text = *metrics.Scrape();
  EXPECT_THAT(text, HasSubstr("moetune_rpc_duration_seconds_count{code=\"OK\","
                              "method=\"GetSweep\",service=\"moetune.v1."
                              "Moetune\"} 1"));
  EXPECT_THAT(text, HasSubstr("le=\"0.003\"} 1"));
}

}  // namespace
}  // namespace moetune::coordinator::http
