#include "coordinator/cli/compare.h"

#include <sstream>

#include "coordinator/cli/compare_report.h"
#include "coordinator/device_bandwidth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::cli {
namespace {

using ::testing::HasSubstr;

struct T {
  int64_t id;
  int tp;  // the config
  double median, lo, hi;
  std::string build = "b1";
  v1::TrialState state = v1::DONE;
  std::string device = "NVIDIA H200";
  double floor_us = 5;  // at the bandwidth the worker measured
};

v1::Trial MakeTrial(const T& t) {
  v1::Trial trial;
  trial.set_trial_id(t.id);
  trial.set_workload_hash("w1");
  trial.mutable_workload()->set_model_preset("glm5");
  trial.mutable_workload()->set_batch_size(8);
  trial.mutable_config()->set_moe_backend("fused_gemv");
  trial.mutable_config()->set_tp(t.tp);
  trial.set_state(t.state);
  v1::TrialResult& r = *trial.mutable_result();
  r.set_outcome(t.state);
  r.mutable_fingerprint()->set_device_name(t.device);
  r.mutable_fingerprint()->set_build_hash(t.build);
  r.mutable_stats()->set_samples(20);
  r.mutable_stats()->set_median_us(t.median);
  r.mutable_stats()->set_ci_low_us(t.lo);
  r.mutable_stats()->set_ci_high_us(t.hi);
  // 4500 bytes in floor_us at 4500/floor_us/1e3 GB/s.
  r.mutable_roofline()->set_bytes(4500);
  r.mutable_roofline()->set_floor_us(t.floor_us);
  if (t.state != v1::DONE) r.set_reason("relative error 0.5 exceeds 0.02");
  return trial;
}

std::vector<v1::Trial> Trials(const std::vector<T>& specs) {
  std::vector<v1::Trial> trials;
  for (const T& t : specs) trials.push_back(MakeTrial(t));
  return trials;
}

const ConfigComparison& RowOfTp(const ComparisonReport& report, int tp) {
  for (const ConfigComparison& row : report.configs) {
    if (row.config.tp() == tp) return row;
  }
  static const ConfigComparison none;
  ADD_FAILURE() << "no row for tp " << tp;
  return none;
}

TEST(CompareTest, VerdictsFollowTheIntervals) {
  const auto baseline = Trials({{1, 1, 10, 9.8, 10.2},
                                {2, 2, 20, 19.5, 20.5},
                                {3, 4, 30, 29, 31},
                                {4, 8, 40, 39, 41}});
  const auto target = Trials({{11, 1, 13.5, 13.2, 13.8},  // 35% slower
                              {12, 2, 18, 17.5, 18.5},    // faster
                              {13, 4, 30.5, 29.8, 31.2},  // same: overlap
                              {14, 8, 0, 0, 0, "b1", v1::INCORRECT}});
  CompareOptions options;
  options.threshold_pct = 5;
  const ComparisonReport report = Compare(baseline, target, options);
  ASSERT_EQ(report.configs.size(), 4u);
  EXPECT_EQ(RowOfTp(report, 1).verdict, Verdict::kSlower);
  EXPECT_NEAR(RowOfTp(report, 1).change, 0.35, 1e-12);
  EXPECT_TRUE(RowOfTp(report, 1).regression);
  EXPECT_EQ(RowOfTp(report, 2).verdict, Verdict::kFaster);
  EXPECT_EQ(RowOfTp(report, 4).verdict, Verdict::kSame);
  EXPECT_FALSE(RowOfTp(report, 4).regression);
  EXPECT_EQ(RowOfTp(report, 8).verdict, Verdict::kNowFailing);
  EXPECT_TRUE(RowOfTp(report, 8).regression);
  EXPECT_EQ(report.regressions, 2);
  EXPECT_EQ(report.compared, 4);
  // The winner of each side: 10 us before, 13.5 us now.
  ASSERT_EQ(report.workloads.size(), 1u);
  EXPECT_EQ(report.workloads[0].verdict, Verdict::kSlower);
  EXPECT_EQ(report.workloads[0].target_best->target.trial_id, 11);
}

TEST(CompareTest, ASlowdownWithinTheThresholdIsNotARegression) {
  const auto baseline = Trials({{1, 1, 10, 9.9, 10.1}});
  const auto target = Trials({{2, 1, 10.3, 10.2, 10.4}});
  CompareOptions options;
  options.threshold_pct = 5;
  const ComparisonReport report = Compare(baseline, target, options);
  EXPECT_EQ(report.configs[0].verdict, Verdict::kSlower);
  EXPECT_FALSE(report.configs[0].regression);
  options.threshold_pct = -1;  // no threshold: never a regression
  EXPECT_EQ(Compare(baseline, target, options).regressions, 0);
}

TEST(CompareTest, BuildsMatchOnlyWhenAskedAndGpusNever) {
  const auto baseline = Trials({{1, 1, 10, 9.9, 10.1, "old"}});
  const auto new_build = Trials({{2, 1, 10, 9.9, 10.1, "new"}});
  const ComparisonReport strict = Compare(baseline, new_build, {});
  EXPECT_EQ(strict.compared, 0);
  EXPECT_TRUE(strict.would_match_across_builds);
  CompareOptions across;
  across.across_builds = true;
  const ComparisonReport matched = Compare(baseline, new_build, across);
  EXPECT_EQ(matched.compared, 1);
  EXPECT_EQ(matched.configs[0].baseline.build_hash, "old");
  EXPECT_EQ(matched.configs[0].target.build_hash, "new");
  const auto other_gpu =
      Trials({{3, 1, 10, 9.9, 10.1, "new", v1::DONE, "NVIDIA H100"}});
  EXPECT_EQ(Compare(baseline, other_gpu, across).compared, 0);
}

// Nothing in common (another build): no winner is set beside the other as
// "slower"; the report says why and what to pass.
TEST(CompareReportTest, NothingComparedPrintsNoWinnersAndSaysWhy) {
  const ComparisonReport report =
      Compare(Trials({{1, 1, 10, 9.9, 10.1, "old"}}),
              Trials({{2, 1, 20, 19.9, 20.1, "new"}}), {});
  EXPECT_TRUE(report.workloads.empty());
  ReportHeader header;
  std::ostringstream text;
  PrintComparison(text, header, report, OutputFormat::kTable);
  EXPECT_THAT(text.str(), HasSubstr("0 configs compared"));
  EXPECT_THAT(text.str(),
              HasSubstr("winners per workload:\nnone compared: no config was "
                        "measured by the same build on both sides (the builds "
                        "differ); pass --across_builds"));
  const std::string configs = text.str().substr(text.str().find("configs:"));
  EXPECT_THAT(configs, ::testing::Not(HasSubstr("slower")));
  EXPECT_THAT(configs, HasSubstr("gone"));
  EXPECT_THAT(text.str(), ::testing::Not(HasSubstr("baseline winner")));
  std::ostringstream json;
  PrintComparison(json, header, report, OutputFormat::kJson);
  EXPECT_THAT(json.str(), HasSubstr("\"workloads\": []"));
}

// A probe measured under load gives a low bandwidth, a high floor and a
// flattering efficiency: both sides use the device's best recorded one.
TEST(CompareTest, FloorsUseTheBestBandwidthRecordedForTheDevice) {
  // Last night: floor 1 us (4.5 GB/s); tonight under load: floor 2 us.
  T old_trial{1, 1, 10, 9.9, 10.1};
  old_trial.floor_us = 1;
  T loaded{2, 1, 10, 9.9, 10.1};
  loaded.floor_us = 2;
  const ComparisonReport report =
      Compare(Trials({old_trial}), Trials({loaded}), {});
  const ConfigComparison& row = report.configs[0];
  EXPECT_NEAR(row.target.floor_us, 1, 1e-9);
  EXPECT_NEAR(row.target.efficiency, 0.1, 1e-9);
  EXPECT_NEAR(row.baseline.efficiency, 0.1, 1e-9);
  // A worker probe that measured more still raises the bar.
  CompareOptions probed;
  probed.probed_gbps[coordinator::DeviceKind(
      MakeTrial(loaded).result().fingerprint())] = 9;
  EXPECT_NEAR(Compare(Trials({old_trial}), Trials({loaded}), probed)
                  .configs[0]
                  .target.floor_us,
              0.5, 1e-9);
}

TEST(CompareReportTest, CsvIsRawAndMarkdownIsATable) {
  const ComparisonReport report = Compare(
      Trials({{1, 1, 10, 9.8, 10.2}}), Trials({{11, 1, 13.5, 13.2, 13.8}}), {});
  ReportHeader header;
  header.baseline.set_sweep_id(1);
  header.target.set_sweep_id(2);
  std::ostringstream csv;
  PrintComparison(csv, header, report, OutputFormat::kCsv);
  EXPECT_THAT(csv.str(), ::testing::StartsWith("workload_hash,preset,batch"));
  EXPECT_THAT(csv.str(), HasSubstr(",graph,attention,baseline_trial,"));
  EXPECT_THAT(csv.str(), HasSubstr(",false,tp,1,DONE,"));
  EXPECT_THAT(csv.str(), HasSubstr(",13.5,13.2,13.8,"));
  EXPECT_THAT(csv.str(), HasSubstr(",0.35,slower,false\n"));
  std::ostringstream md;
  PrintComparison(md, header, report, OutputFormat::kMarkdown);
  EXPECT_THAT(md.str(), HasSubstr("# moetune compare"));
  EXPECT_THAT(md.str(), HasSubstr("| glm5 | 8 | 0 | NVIDIA H200 |"));
  EXPECT_THAT(md.str(), HasSubstr("+35.0%"));
  std::ostringstream json;
  PrintComparison(json, header, report, OutputFormat::kJson);
  EXPECT_THAT(json.str(), HasSubstr("\"verdict\": \"slower\""));
  EXPECT_THAT(json.str(), HasSubstr("\"target_median_us\": 13.5"));
}

// The default text report keeps to 120 columns: medians without their
// intervals, no device or efficiencies; --wide has them.
TEST(CompareReportTest, TheDefaultTextReportKeepsTo120Columns) {
  const ComparisonReport report = Compare(
      Trials({{1, 1, 10, 9.8, 10.2}}), Trials({{11, 1, 13.5, 13.2, 13.8}}), {});
  ReportHeader header;
  std::ostringstream narrow;
  PrintComparison(narrow, header, report, OutputFormat::kTable,
                  /*wide=*/false);
  const std::string tables =
      narrow.str().substr(narrow.str().find("winners per workload:"));
  EXPECT_THAT(tables, HasSubstr("fused_gemv - tp1 ep0: 10.0  "));
  EXPECT_THAT(
      tables,
      HasSubstr("config                baseline_us  target_us  change  "
                "verdict  note\n"
                "glm5    8      0    fused_gemv - tp1 ep0  10.0         "
                "13.5       +35.0%  slower\n"));
  EXPECT_THAT(tables, ::testing::Not(HasSubstr("NVIDIA H200")));
  std::istringstream lines(narrow.str());
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 120u) << line;
  }
  std::ostringstream wide;
  PrintComparison(wide, header, report, OutputFormat::kTable, /*wide=*/true);
  EXPECT_THAT(wide.str(), HasSubstr("10.0 (9.8-10.2)"));
  EXPECT_THAT(wide.str(), HasSubstr("NVIDIA H200"));
}

// A config that crashes tonight leaves no result of its own: its worker's
// probe says where it ran, and it is a regression, not a missing row.
TEST(CompareTest, ACrashTonightIsNowFailingThroughItsWorker) {
  const auto baseline = Trials({{1, 1, 10, 9.9, 10.1}});
  v1::Trial crashed = MakeTrial({2, 1, 0, 0, 0, "b1", v1::FAILED});
  crashed.mutable_result()->clear_fingerprint();
  crashed.set_worker_id("w-1");
  crashed.set_reason("trial process killed by signal 11");
  CompareOptions options;
  options.threshold_pct = 0;
  EXPECT_EQ(Compare(baseline, {crashed}, options).compared, 0);
  options.worker_fingerprints["w-1"] =
      MakeTrial({1, 1, 10, 9.9, 10.1}).result().fingerprint();
  const ComparisonReport report = Compare(baseline, {crashed}, options);
  ASSERT_EQ(report.compared, 1);
  EXPECT_EQ(report.configs[0].verdict, Verdict::kNowFailing);
  EXPECT_EQ(report.configs[0].target.reason,
            "trial process killed by signal 11");
  EXPECT_EQ(report.regressions, 1);
}

}  // namespace
}  // namespace moetune::cli
