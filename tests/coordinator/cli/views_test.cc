#include "coordinator/cli/views.h"

#include <sstream>

#include "coordinator/cli/best_view.h"
#include "coordinator/cli/usage.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

v1::QueryTrialsResponse OneDoneTrial() {
  v1::QueryTrialsResponse trials;
  v1::Trial* t = trials.add_trials();
  t->set_trial_id(1);
  t->set_sweep_id(4);
  t->set_state(v1::DONE);
  t->mutable_config()->set_moe_backend("cpu_blocked");
  t->mutable_result()->mutable_stats()->set_samples(3);
  t->mutable_result()->mutable_stats()->set_median_us(3650.95);
  t->mutable_result()->mutable_stats()->set_ci_low_us(3645.9);
  t->mutable_result()->mutable_stats()->set_ci_high_us(3656.0);
  t->mutable_result()->mutable_roofline()->set_efficiency(0.0089);
  return trials;
}

// CSV cells hold raw numbers: never "0.9%" or "3645.9-3656.0", which are the
// table's forms.
TEST(ViewsTest, CsvHasRawNumbersAndTheIntervalInTwoColumns) {
  std::ostringstream csv;
  PrintTrials(csv, OneDoneTrial(), OutputFormat::kCsv);
  const std::string header = csv.str().substr(0, csv.str().find('\n'));
  EXPECT_THAT(header, StartsWith("trial,sweep,workload_hash,backend"));
  EXPECT_THAT(header, HasSubstr("median_us,p90_us,ci_low_us,ci_high_us"));
  EXPECT_THAT(csv.str(), HasSubstr(",3650.95,0,3645.9,3656,"));
  EXPECT_THAT(csv.str(), HasSubstr(",0.0089,"));
  EXPECT_EQ(csv.str().find('%'), std::string::npos);
  // The table keeps the reader's forms.
  std::ostringstream table;
  PrintTrials(table, OneDoneTrial(), OutputFormat::kTable);
  EXPECT_THAT(table.str(), HasSubstr("3645.9-3656.0"));
  EXPECT_THAT(table.str(), HasSubstr("0.9%"));
}

// The default text table keeps to 120 columns: the least important
// columns left out, a long reason cut; --wide (TrialsTable) has them all.
TEST(ViewsTest, TheDefaultTableKeepsTo120Columns) {
  v1::QueryTrialsResponse trials = OneDoneTrial();
  v1::Trial* failed = trials.add_trials();
  failed->set_trial_id(2);
  failed->set_state(v1::FAILED);
  failed->mutable_config()->set_moe_backend("fused_gemv_fp8");
  failed->set_reason(std::string(200, 'x'));
  std::ostringstream narrow;
  PrintTrials(narrow, trials, OutputFormat::kTable);
  std::istringstream lines(narrow.str());
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line,
            "trial  backend         tile  tpxep  graph  batch  ctx  median_us  "
            "ci95_us        eff   tok_s  state");
  while (std::getline(lines, line)) EXPECT_LE(line.size(), 120u) << line;
  EXPECT_THAT(narrow.str(), HasSubstr("\nwhy:\ntrial 2: xxx"));
  EXPECT_THAT(narrow.str(), HasSubstr("xxx...\n"));
  std::ostringstream wide;
  PrintTrials(wide, trials, OutputFormat::kTable, /*wide=*/true);
  EXPECT_THAT(wide.str(), HasSubstr("p90_us"));
  EXPECT_THAT(wide.str(), HasSubstr(std::string(200, 'x') + "\n"));
}

// Data-parallel attention is its own column for programs and follows the
// layout for people; tp attention (unset) reads "tp".
TEST(ViewsTest, TrialsNameTheirAttention) {
  v1::QueryTrialsResponse trials = OneDoneTrial();
  v1::Trial* dp = trials.add_trials();
  *dp = trials.trials(0);
  dp->set_trial_id(2);
  dp->mutable_config()->set_tp(2);
  dp->mutable_config()->set_attention_split(v1::ATTENTION_DP);
  std::ostringstream csv;
  PrintTrials(csv, trials, OutputFormat::kCsv);
  EXPECT_THAT(csv.str(), StartsWith("trial,sweep,workload_hash,backend,tile,"
                                    "tp,ep,graph,attention,batch,"));
  EXPECT_THAT(csv.str(), HasSubstr("\n1,4,,cpu_blocked,-,0,0,false,tp,"));
  EXPECT_THAT(csv.str(), HasSubstr("\n2,4,,cpu_blocked,-,2,0,false,dp,"));
  std::ostringstream table;
  PrintTrials(table, trials, OutputFormat::kTable);
  EXPECT_THAT(table.str(), HasSubstr("2x0 dp-attn"));
  EXPECT_EQ(ConfigCells(dp->config()), "cpu_blocked - tp2 ep0 dp-attn");
  v1::GetBestResponse best;
  *best.add_workloads()->mutable_best() = *dp;
  std::ostringstream best_csv;
  BestTable(best).Print(best_csv, OutputFormat::kCsv);
  EXPECT_THAT(best_csv.str(), HasSubstr(",tp,ep,graph,attention,median_us,"));
  EXPECT_THAT(best_csv.str(), HasSubstr(",cpu_blocked,-,2,0,false,dp,"));
}

TEST(ViewsTest, BestAsCsvHasOneRowPerRole) {
  v1::GetBestResponse best;
  v1::BestForWorkload* w = best.add_workloads();
  w->set_workload_hash("abc");
  w->mutable_best()->set_trial_id(3);
  w->mutable_best()->mutable_result()->mutable_stats()->set_median_us(12.5);
  w->mutable_runner_up()->set_trial_id(4);
  w->set_margin_us(1.5);
  w->set_decided_by("fastest");
  std::ostringstream csv;
  BestTable(best).Print(csv, OutputFormat::kCsv);
  EXPECT_THAT(csv.str(), StartsWith("workload_hash,preset,batch"));
  EXPECT_THAT(csv.str(), HasSubstr("\nabc,"));
  EXPECT_THAT(csv.str(), HasSubstr(",best,3,"));
  EXPECT_THAT(csv.str(), HasSubstr(",runner_up,4,"));
  EXPECT_THAT(csv.str(), HasSubstr(",12.5,"));
}

TEST(ViewsTest, ProbesInCsvStartWithTheHeader) {
  v1::Probe probe;
  probe.mutable_fingerprint()->set_device_name("cpu model");
  probe.mutable_device()->set_measured_read_gbps(33.5);
  v1::BackendProbe* b = probe.add_backends();
  b->set_name("fused_gemv");
  b->set_reason("GPU backend");
  std::ostringstream csv;
  ProbesTable({{"cpu", probe}}).Print(csv, OutputFormat::kCsv);
  EXPECT_EQ(csv.str(),
            "device,device_name,arch,read_gbps,backend,available,tiles,"
            "reason,versions,plugin,error_bound,error_bound_why\n"
            "cpu,cpu model,,33.5,fused_gemv,false,,GPU backend,,,,\n");
}

// A plugin backend's probe says what serves it, what it found and how
// close it must be; the table's native rows add nothing of that.
TEST(ViewsTest, PluginBackendsShowTheirCommandVersionsAndBound) {
  v1::Probe probe;
  probe.add_backends()->set_name("cpu_reference");
  v1::BackendProbe* b = probe.add_backends();
  b->set_name("torch_grouped_bf16");
  b->set_reason("not installed: torch");
  b->add_versions("torch absent");
  b->add_versions("numpy 1.24.2");
  b->set_plugin("/usr/bin/python3 host.py");
  b->set_error_bound(0.02);
  b->set_error_bound_why("BF16 GEMM outputs");
  EXPECT_EQ(PluginDetails(probe),
            "plugin backends:\n"
            "  torch_grouped_bf16: plugin /usr/bin/python3 host.py\n"
            "    versions: torch absent, numpy 1.24.2\n"
            "    error bound: 0.02 (BF16 GEMM outputs)\n"
            "    unavailable: not installed: torch\n");
  std::ostringstream csv;
  ProbesTable({{"cpu", probe}}).Print(csv, OutputFormat::kCsv);
  EXPECT_THAT(csv.str(),
              HasSubstr("\ncpu,,,0,torch_grouped_bf16,false,,not installed: "
                        "torch,torch absent; numpy 1.24.2,/usr/bin/python3 "
                        "host.py,0.02,BF16 GEMM outputs\n"));
  probe.mutable_backends()->DeleteSubrange(1, 1);
  EXPECT_EQ(PluginDetails(probe), "");
}

TEST(UsageTest, EveryCommandHasItsOwnUsage) {
  for (const CommandHelp& c : AllCommands()) {
    const auto usage = CommandUsage(c.name);
    ASSERT_TRUE(usage.has_value()) << c.name;
    EXPECT_THAT(*usage, StartsWith("usage: moetune " + c.name)) << c.name;
    EXPECT_THAT(*usage, HasSubstr("exit: ")) << c.name;
    EXPECT_THAT(GlobalUsage(), HasSubstr(c.synopsis));
  }
  EXPECT_FALSE(CommandUsage("frobnicate").has_value());
}

}  // namespace
}  // namespace moetune::cli
