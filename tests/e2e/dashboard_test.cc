// The HTTP side end to end: a real moetune-coordinator on a database holding
// a real recorded H200 sweep, asked over HTTP for the API as JSON, metrics
// and the page, and the page loaded in headless Chromium (installed by
// scripts/setup.sh), which must draw its charts from that data. The
// screenshot is kept in the test's output directory for a person to look at.
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/moetune.pb.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/process.h"
#include "tests/e2e/recorded_db.h"

namespace moetune::e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Where the screenshot goes: $TEST_OUTPUT_DIR, else the build's
// tests/output directory.
fs::path OutputDir() {
  const char* env = std::getenv("TEST_OUTPUT_DIR");
  fs::path dir = env != nullptr ? fs::path(env) : fs::path(MOETUNE_TEST_OUTPUT);
  fs::create_directories(dir);
  return dir;
}

std::string Chromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (fs::exists(path)) return path;
  }
  return "";
}

const std::string kRecordedSweep =
    kSource + "/tests/data/recorded_h200_sweep.json";

class DashboardTest : public ::testing::Test {
 protected:
  // The sweep the page shows, written to the database before the
  // coordinator starts.
  virtual absl::StatusOr<int64_t> WriteSweep(const std::string& db) {
    return WriteRecordedSweep(kRecordedSweep, db, "recorded-h200");
  }

  void SetUp() override {
    dir_ = TempDir("dashboard");
    const std::string db = (dir_ / "dashboard.db").string();
    absl::StatusOr<int64_t> sweep = WriteSweep(db);
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    sweep_id_ = *sweep;
    coordinator_ = std::make_unique<Process>(
        std::vector<std::string>{kBin + "/moetune-coordinator", "--listen",
                                 "127.0.0.1:0", "--worker_listen",
                                 "127.0.0.1:0", "--db", db, "--http_listen",
                                 "127.0.0.1:0"},
        (dir_ / "coordinator.log").string());
    http_address_ = coordinator_->ReadLineStartingWith("http on ", 30000);
    ASSERT_FALSE(http_address_.empty()) << "no HTTP address printed";
    const size_t colon = http_address_.rfind(':');
    client_ = std::make_unique<httplib::Client>(
        http_address_.substr(0, colon),
        std::stoi(http_address_.substr(colon + 1)));
  }

  // The database and Chromium's profile go; the screenshot stays (it is in
  // OutputDir()).
  void TearDown() override {
    client_.reset();
    coordinator_.reset();
    fs::remove_all(dir_);
  }

  httplib::Result Get(const std::string& path) { return client_->Get(path); }

  // Headless Chromium's command line, to which the caller appends what to do
  // with the page, and the page's address showing the sweep.
  std::string ChromiumCommand(const std::string& chromium) const {
    return absl::StrCat(
        chromium, " --headless --no-sandbox --disable-gpu --hide-scrollbars ",
        "--user-data-dir=", (dir_ / "chromium").string(),
        " --window-size=1400,1300 --virtual-time-budget=20000 ");
  }
  std::string PageUrl() const {
    return absl::StrCat("http://", http_address_, "/#sweep=", sweep_id_);
  }
  // The page's DOM as headless Chromium leaves it, which must be drawn and
  // without error (the failures recorded here).
  std::string DrawnPage(const std::string& chromium) const {
    CommandResult dom = RunCommand(ChromiumCommand(chromium) + "--dump-dom '" +
                                   PageUrl() + "'");
    EXPECT_EQ(dom.exit_code, 0) << dom.output;
    EXPECT_THAT(dom.output, HasSubstr("data-state=\"drawn\""));
    EXPECT_THAT(dom.output, ::testing::Not(HasSubstr("data-error")));
    return dom.output;
  }

  fs::path dir_;
  int64_t sweep_id_ = 0;
  std::unique_ptr<Process> coordinator_;
  std::string http_address_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(DashboardTest, ServesTheApiAsJson) {
  httplib::Result sweeps = Get("/moetune.v1.Moetune/ListSweeps");
  ASSERT_TRUE(sweeps);
  EXPECT_EQ(sweeps->status, 200);
  EXPECT_THAT(sweeps->body, HasSubstr("\"name\":\"recorded-h200\""));
  EXPECT_THAT(sweeps->body, HasSubstr("\"state\":\"FINISHED\""));

  httplib::Result trials = Get(absl::StrCat(
      "/moetune.v1.Moetune/QueryTrials?sweep_id=", sweep_id_, "&state=DONE"));
  ASSERT_TRUE(trials);
  EXPECT_EQ(trials->status, 200);
  EXPECT_THAT(trials->body, HasSubstr("\"median_us\""));
  EXPECT_THAT(trials->body, ::testing::Not(HasSubstr("\"UNAVAILABLE\"")));

  httplib::Result bad = Get("/moetune.v1.Moetune/GetSweep?sweep=1");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("sweep: not a query parameter"));
  EXPECT_THAT(bad->body, HasSubstr("allowed: sweep_id"));

  httplib::Result missing = Get("/moetune.v1.Moetune/GetSweep?sweep_id=999");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(DashboardTest, IsReadOnlyByDefault) {
  httplib::Result submit = client_->Post(
      "/moetune.v1.Moetune/CancelSweep",
      absl::StrCat("{\"sweep_id\": ", sweep_id_, "}"), "application/json");
  ASSERT_TRUE(submit);
  EXPECT_EQ(submit->status, 403);
  EXPECT_THAT(submit->body, HasSubstr("--http_allow_writes"));
}

TEST_F(DashboardTest, ExposesPrometheusMetrics) {
  ASSERT_TRUE(Get("/moetune.v1.Moetune/ListSweeps"));
  httplib::Result metrics = Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("moetune_trials{state=\"DONE\"} 39"));
  EXPECT_THAT(metrics->body, HasSubstr("moetune_queue_depth 0"));
  EXPECT_THAT(metrics->body, HasSubstr("moetune_workers_alive 0"));
  EXPECT_THAT(metrics->body, HasSubstr("moetune_trials_finished_total 48"));
  EXPECT_THAT(metrics->body,
              HasSubstr("moetune_rpc_duration_seconds_count{code=\"OK\","
                        "method=\"ListSweeps\""));
  EXPECT_THAT(metrics->body, HasSubstr("moetune_best_median_seconds{"));
  EXPECT_THAT(metrics->body, HasSubstr("moetune_best_efficiency_ratio{"));
  EXPECT_THAT(metrics->body, HasSubstr("batch=\"32\""));
}

TEST_F(DashboardTest, ServesThePageButNothingOutsideIt) {
  httplib::Result page = Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->body, HasSubstr("vendor/chart.umd.js"));
  httplib::Result chart = Get("/vendor/chart.umd.js");
  ASSERT_TRUE(chart);
  EXPECT_EQ(chart->status, 200);
  for (const char* path :
       {"/../CMakeLists.txt", "/%2e%2e/%2e%2e/etc/passwd", "/vendor/../../x.db",
        "/.hidden.js", "/web", "/dashboard.db", "/..%2fcoordinator.log"}) {
    httplib::Result outside = Get(path);
    ASSERT_TRUE(outside) << path;
    EXPECT_EQ(outside->status, 404) << path;
  }
}

TEST_F(DashboardTest, PageDrawsTheChartsInHeadlessChromium) {
  const std::string chromium = Chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed";
  const std::string url = PageUrl();
  const std::string flags = ChromiumCommand(chromium);
  CommandResult dom = RunCommand(flags + "--dump-dom '" + url + "'");
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  EXPECT_THAT(dom.output, HasSubstr("data-state=\"drawn\""));
  EXPECT_THAT(dom.output, HasSubstr("data-charts=\"3\""));
  EXPECT_THAT(dom.output, HasSubstr("data-trials=\"48\""));
  // 3 backends x 3 batches with a DONE trial each.
  EXPECT_THAT(dom.output, HasSubstr("data-points=\"9\""));
  // Per backend: the median line and its interval's two edges (latency and
  // efficiency), and its bandwidth (roofline), plus the roofline's ceiling.
  EXPECT_THAT(dom.output, HasSubstr("data-datasets=\"22\""));
  EXPECT_THAT(dom.output, ::testing::Not(HasSubstr("data-error")));

  const fs::path png = OutputDir() / "dashboard.png";
  fs::remove(png);
  CommandResult shot =
      RunCommand(flags + "--screenshot=" + png.string() + " '" + url + "'");
  ASSERT_EQ(shot.exit_code, 0) << shot.output;
  ASSERT_TRUE(fs::exists(png)) << shot.output;
  // A blank page compresses to a few KB; three drawn charts do not.
  EXPECT_GT(fs::file_size(png), 40000u) << png;
  std::cout << "screenshot: " << png.string() << "\n";
}

// A trial's timing (median and its interval) scaled by `factor`: made-up
// figures for the page's tests.
void ScaleTiming(double factor, v1::Trial* trial) {
  v1::TimingStats& stats = *trial->mutable_result()->mutable_stats();
  stats.set_median_us(stats.median_us() * factor);
  stats.set_ci_low_us(stats.ci_low_us() * factor);
  stats.set_ci_high_us(stats.ci_high_us() * factor);
}

// The recorded sweep with each fused_gemv trial repeated under
// data-parallel attention, its times 1.3x the recorded ones: made-up
// figures, which only the page's grouping of points into lines reads.
absl::StatusOr<int64_t> WriteSweepWithDpTrials(const std::string& db) {
  ASSIGN_OR_RETURN(v1::QueryTrialsResponse trials,
                   ReadRecording(kRecordedSweep));
  const int recorded = trials.trials_size();
  for (int i = 0; i < recorded; ++i) {
    if (trials.trials(i).config().moe_backend() != "fused_gemv") continue;
    v1::Trial dp = trials.trials(i);
    dp.mutable_config()->set_attention_split(v1::ATTENTION_DP);
    ScaleTiming(1.3, &dp);
    *trials.add_trials() = dp;
  }
  return WriteRecordedSweep(trials, db, "recorded-h200-with-dp");
}

class DashboardDpTest : public DashboardTest {
 protected:
  absl::StatusOr<int64_t> WriteSweep(const std::string& db) override {
    return WriteSweepWithDpTrials(db);
  }
};

// A sweep of tp against dp attention (deploy/h200_dp_sweep.json's kind): a
// backend's dp points are a line of their own, not folded into its tp line.
TEST_F(DashboardDpTest, DataParallelAttentionGetsItsOwnLine) {
  const std::string chromium = Chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed";
  const std::string dom = DrawnPage(chromium);
  // The 9 best points of the recorded sweep and fused_gemv's 3 under dp.
  EXPECT_THAT(dom, HasSubstr("data-points=\"12\""));
  EXPECT_THAT(dom, HasSubstr("fused_gemv dp-attn"));
  // One more backend line: 3 latency, 3 efficiency and 1 roofline datasets.
  EXPECT_THAT(dom, HasSubstr("data-datasets=\"29\""));
}

// The recorded ring-depth sweep (kernels/cuda/moe/PERF.md "Pipeline depth
// as a tile parameter") with grouped_wgmma 128x256s2 made twice as fast at
// batch 256: made-up figures, so that a tile with its own ring depth wins
// somewhere and the page must name it.
absl::StatusOr<int64_t> WriteStagesSweepWithADepthWinning(
    const std::string& db) {
  ASSIGN_OR_RETURN(
      v1::QueryTrialsResponse trials,
      ReadRecording(kSource +
                    "/tests/data/recorded_h200_serving_stages_sweep.json"));
  for (v1::Trial& t : *trials.mutable_trials()) {
    if (t.workload().batch_size() != 256 || t.config().tile().stages() != 2) {
      continue;
    }
    ScaleTiming(0.5, &t);
  }
  return WriteRecordedSweep(trials, db, "recorded-h200-stages");
}

class DashboardStagesTest : public DashboardTest {
 protected:
  absl::StatusOr<int64_t> WriteSweep(const std::string& db) override {
    return WriteStagesSweepWithADepthWinning(db);
  }
};

// The winners line names a tile with its ring depth as the CLI does.
TEST_F(DashboardStagesTest, WinnersNameATilesRingDepth) {
  const std::string chromium = Chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed";
  const std::string dom = DrawnPage(chromium);
  EXPECT_THAT(dom,
              HasSubstr("batch 256, ctx 2048: grouped_wgmma (tile 128x256s2, "
                        "tp1xep1, graph on)"));
  EXPECT_THAT(dom, HasSubstr("grouped_wgmma (tile 128x256, tp1xep1"));
}

// Server-Sent Events in `stream`, and how many of them carry a trial.
std::pair<int, int> CountEvents(const std::string& stream) {
  int events = 0, trials = 0;
  for (size_t at = 0; (at = stream.find("data: ", at)) != std::string::npos;
       ++at) {
    ++events;
    const std::string event = stream.substr(at, stream.find("\n\n", at) - at);
    if (event.find("\"trial\":{\"trial_id\"") != std::string::npos) ++trials;
  }
  return {events, trials};
}

void WatchARunningSweep(const fs::path& dir);

// A sweep while it runs: the HTTP event stream follows it live, trial by
// trial, to its end, and the metrics see the worker and the finished trials.
TEST(DashboardLiveTest, WatchStreamsARunningSweepOverHttp) {
  const fs::path dir = TempDir("dashboard-live");
  WatchARunningSweep(dir);  // the cluster is gone when it returns
  fs::remove_all(dir);
}

void WatchARunningSweep(const fs::path& dir) {
  CoordinatorFlags flags;
  flags.extra = {"--http_listen", "127.0.0.1:0"};
  Cluster cluster(dir, flags);
  const std::string address =
      cluster.coordinator().ReadLineStartingWith("http on ", 20000);
  ASSERT_FALSE(address.empty());
  cluster.AddWorker("w1");
  const int64_t sweep_id = cluster.Submit(TwelveTrialSpec());
  const size_t colon = address.rfind(':');
  httplib::Client client(address.substr(0, colon),
                         std::stoi(address.substr(colon + 1)));
  client.set_read_timeout(std::chrono::seconds(180));
  std::string stream;
  httplib::Result watch = client.Get(
      absl::StrCat("/moetune.v1.Moetune/WatchSweep?sweep_id=", sweep_id),
      [&](const char* data, size_t length) {
        stream.append(data, length);
        return true;
      });
  ASSERT_TRUE(watch);
  EXPECT_EQ(watch->status, 200);
  EXPECT_EQ(watch->get_header_value("Content-Type"), "text/event-stream");
  const auto [events, trials] = CountEvents(stream);
  EXPECT_EQ(trials, 12) << stream;
  EXPECT_GE(events, 14);  // first progress, 12 trials, the final counts
  EXPECT_THAT(stream.substr(stream.rfind("data: ")),
              HasSubstr("\"state\":\"FINISHED\""));

  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("moetune_trials_finished_total 12"));
  EXPECT_THAT(metrics->body, HasSubstr("moetune_workers_alive 1"));
  EXPECT_THAT(metrics->body,
              HasSubstr("moetune_rpc_duration_seconds_count{code=\"OK\","
                        "method=\"ReportResult\""));
}

}  // namespace
}  // namespace moetune::e2e
