// The moetune CLI and the daemons' command lines as users and CI jobs run
// them: help and version, exit codes, machine-readable output, the
// regression report, the export file, logs and worker-log hygiene.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace moetune::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace fs = std::filesystem;

const std::vector<std::string> kCommands = {"sweep",   "sweeps",  "cancel",
                                            "results", "best",    "compare",
                                            "export",  "workers", "probe"};

std::string FirstLine(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `args` with stdout and stderr apart (stderr into `err`, if given):
// a subshell, because RunCommand sends the command's stderr to stdout.
CommandResult Stdout(const std::string& args, const fs::path& err = {}) {
  return RunCommand("(" + kBin + "/" + args + " 2>" +
                    (err.empty() ? std::string("/dev/null") : err.string()) +
                    ")");
}

TEST(CliTest, HelpAndVersionOnEveryBinaryExitZero) {
  for (const std::string binary :
       {"moetune", "moetune-coordinator", "moetune-worker"}) {
    const CommandResult help = RunCommand(kBin + "/" + binary + " --help");
    EXPECT_EQ(help.exit_code, 0) << binary << "\n" << help.output;
    EXPECT_THAT(help.output, HasSubstr("usage: " + binary)) << binary;
    EXPECT_THAT(help.output, HasSubstr("--log_level")) << binary;
    EXPECT_THAT(help.output, ::testing::Not(HasSubstr("No flags matched")));
    const CommandResult version =
        RunCommand(kBin + "/" + binary + " --version");
    EXPECT_EQ(version.exit_code, 0) << binary;
    EXPECT_TRUE(std::regex_search(
        version.output,
        std::regex("^" + binary + " [0-9]+\\.[0-9]+\\.[0-9]+ \\(build .+\\)")))
        << version.output;
    const CommandResult unknown = RunCommand(kBin + "/" + binary + " --bogus");
    EXPECT_EQ(unknown.exit_code, 2) << binary << "\n" << unknown.output;
    EXPECT_THAT(unknown.output, HasSubstr("unknown flag --bogus"));
  }
  for (const std::string& command : kCommands) {
    const CommandResult help =
        RunCommand(kBin + "/moetune " + command + " --help");
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_THAT(help.output, StartsWith("usage: moetune " + command))
        << command;
    EXPECT_EQ(RunCommand(kBin + "/moetune help " + command).output,
              help.output);
    // Only the flags the command reads: probe asks no coordinator, and
    // only sweep and probe run a worker binary.
    EXPECT_EQ(help.output.find("--coordinator") == std::string::npos,
              command == "probe")
        << command;
    EXPECT_EQ(help.output.find("--worker_binary") != std::string::npos,
              command == "sweep" || command == "probe")
        << command;
  }
  EXPECT_THAT(RunCommand(kBin + "/moetune cancel --help").output,
              HasSubstr("required: cancel never picks the latest sweep"));
}

// cancel names its sweep; export writes JSON and refuses other formats
// naming the allowed one: both before any database is opened.
TEST(CliTest, CancelNeedsItsSweepAndExportRefusesCsv) {
  const std::string db = (TempDir("cli-refusals") / "none.db").string();
  const CommandResult cancel = RunCommand(kBin + "/moetune cancel --db " + db);
  EXPECT_EQ(cancel.exit_code, 2) << cancel.output;
  EXPECT_THAT(cancel.output,
              HasSubstr("--sweep: required for cancel: the id of the sweep"));
  const CommandResult csv =
      RunCommand(kBin + "/moetune export --format csv --db " + db);
  EXPECT_EQ(csv.exit_code, 2) << csv.output;
  EXPECT_THAT(csv.output, HasSubstr("--format: 'csv' is not allowed for "
                                    "export; allowed: json"));
  EXPECT_FALSE(fs::exists(db));
}

TEST(CliTest, UsageErrorsExitTwoAndQueriesNeverCreateADatabase) {
  const fs::path dir = TempDir("cli-codes");
  const std::string db = (dir / "none.db").string();
  EXPECT_EQ(
      RunCommand(kBin + "/moetune sweep --spec /nonexistent.json --db " + db)
          .exit_code,
      2);
  EXPECT_EQ(RunCommand(kBin + "/moetune sweeps --limit=many").exit_code, 2);
  EXPECT_EQ(RunCommand(kBin + "/moetune").exit_code, 2);
  EXPECT_EQ(
      RunCommand(kBin + "/moetune-coordinator --log_level=loud --db " + db)
          .exit_code,
      2);
  for (const std::string command : {"sweeps", "results", "best", "workers",
                                    "compare", "export", "cancel --sweep 1"}) {
    const CommandResult result =
        RunCommand(kBin + "/moetune " + command + " --db " + db);
    EXPECT_EQ(result.exit_code, 1) << command << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr("does not exist")) << command;
  }
  EXPECT_FALSE(fs::exists(db));
  EXPECT_TRUE(fs::is_empty(dir)) << "a query left a file behind";
}

// A spec the coordinator would reject is refused before anything starts:
// no database, no worker log (the logs go to $TMPDIR).
TEST(CliTest, ARejectedSpecCreatesNoDatabaseAndNoWorkerLog) {
  const fs::path dir = TempDir("cli-rejected-spec");
  const fs::path logs = dir / "logs";
  fs::create_directories(logs);
  const fs::path spec = dir / "bad.json";
  std::ofstream(spec) << R"({"name": "bad", "workload": {"modelPreset": )"
                         R"("tiny", "batchSizes": [0]}, "space": )"
                         R"({"moeBackends": ["cpu_reference"]}})";
  const std::string db = (dir / "m.db").string();
  const CommandResult result =
      RunCommand("TMPDIR=" + logs.string() + " " + kBin +
                 "/moetune sweep --spec " + spec.string() + " --db " + db);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("workload.batch_sizes"));
  EXPECT_FALSE(fs::exists(db));
  EXPECT_FALSE(fs::exists(db + ".lock"));
  EXPECT_TRUE(fs::is_empty(logs)) << "a worker log was left behind";
}

// The roofline of the first trial of a `sweep --format json` document.
google::protobuf::Struct FirstRoofline(const std::string& json) {
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok())
      << json;
  const auto& results = parsed.fields().at("results").struct_value();
  const auto& trial =
      results.fields().at("trials").list_value().values(0).struct_value();
  const auto& result = trial.fields().at("result").struct_value();
  return result.fields().at("roofline").struct_value();
}

// A world-2 decode step on the tiny preset, and a calibration whose fit at
// world 2 costs 5 ms a collective (the assumption: 17 us).
std::string CalibrationSweep(const fs::path& dir) {
  const fs::path spec = dir / "ep2.json";
  std::ofstream(spec) << R"({"name": "calibrated", "workload": {
      "modelPreset": "tiny", "batchSizes": [1], "contextLengths": [64],
      "region": "DECODE_STEP"}, "space": {"moeBackends": ["cpu_reference"],
      "tp": [1], "ep": [2]}, "measurement": {"warmupIterations": 1,
      "iterations": 3}})";
  std::ofstream(dir / "comm.json") << R"({"gpus": 2, "fits": [{
      "allreduce": "nccl", "worldSize": 2, "latencyUs": 5000,
      "busGbps": 100, "points": 4}]})";
  return "moetune sweep --gpus 0 --db " + (dir / "c.db").string() + " --spec " +
         spec.string() + " --comm_calibration ";
}

TEST(CliTest, SweepHandsItsCalibrationToTheEmbeddedWorkers) {
  const fs::path dir = TempDir("cli-calibration");
  const CommandResult done = Stdout(
      CalibrationSweep(dir) + (dir / "comm.json").string() + " --format json");
  ASSERT_EQ(done.exit_code, 0) << done.output;
  const google::protobuf::Struct roofline = FirstRoofline(done.output);
  EXPECT_TRUE(roofline.fields().at("comm_modelled").bool_value());
  EXPECT_GE(roofline.fields().at("comm_floor_us").number_value(), 5000);
}

// A file it cannot read would stop the embedded worker at its start, and a
// remote coordinator's workers never see the flag: both are usage errors.
TEST(CliTest, SweepRefusesACalibrationItCannotHandOn) {
  const fs::path dir = TempDir("cli-calibration-refused");
  const std::string sweep = kBin + "/" + CalibrationSweep(dir);
  const CommandResult missing = RunCommand(sweep + "/nonexistent");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output,
              HasSubstr("--comm_calibration: cannot read /nonexistent"));
  const CommandResult remote = RunCommand(sweep + (dir / "comm.json").string() +
                                          " --coordinator 127.0.0.1:1");
  EXPECT_EQ(remote.exit_code, 2);
  EXPECT_THAT(remote.output, HasSubstr("give it to each moetune-worker"));
  EXPECT_FALSE(fs::exists(dir / "c.db"));
}

// A calibration whose value the worker refuses stops it at its start. With
// no worker left the sweep stops too, rather than wait until killed: exit 1
// within seconds, the worker's exit and reason, its log kept, and the sweep
// cancelled in the database like an interrupted one.
TEST(CliTest, SweepStopsWhenEveryWorkerRefusesItsCalibration) {
  const fs::path dir = TempDir("cli-calibration-bad");
  std::ofstream(dir / "ring.json") << R"({"gpus": 2, "fits": [{
      "allreduce": "ring", "worldSize": 2, "latencyUs": 5000,
      "busGbps": 100, "points": 4}]})";
  const auto start = std::chrono::steady_clock::now();
  // `timeout`: a regression fails here rather than hang the suite.
  const CommandResult result =
      RunCommand("TMPDIR=" + dir.string() + " timeout 120 " + kBin + "/" +
                 CalibrationSweep(dir) + (dir / "ring.json").string());
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_LT(took, std::chrono::seconds(30)) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("every embedded worker has exited: local:cpu (exit "
                        "code 2; log "));
  // The end of the log, printed: why the worker refused its start.
  EXPECT_THAT(result.output,
              HasSubstr("fits[0].allreduce: 'ring'; allowed: nccl, oneshot"));
  EXPECT_THAT(result.output, HasSubstr("sweep 1 cancelled"));
  std::smatch log;
  ASSERT_TRUE(std::regex_search(result.output, log,
                                std::regex("worker log (\\S+\\.log)")))
      << result.output;
  EXPECT_THAT(ReadFile(log[1].str()), HasSubstr("'ring'")) << "log not kept";
  const CommandResult sweeps =
      Stdout("moetune sweeps --format csv --db " + (dir / "c.db").string());
  EXPECT_THAT(sweeps.output, HasSubstr(",calibrated,ABORTED,"))
      << sweeps.output;
}

// Two nights of the same spec, then what a nightly job does with them.
class TwoSweepsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(TempDir("cli-nights"));
    db_ = new std::string((*dir_ / "nights.db").string());
    for (int night = 0; night < 2; ++night) {
      sweeps_[night] =
          Stdout("moetune sweep --gpus 0 --format csv --spec " + kSource +
                     "/deploy/example_sweep.json --db " + *db_,
                 *dir_ / ("night" + std::to_string(night) + ".err"));
    }
  }
  static std::string Db() { return " --db " + *db_; }
  static fs::path* dir_;
  static std::string* db_;
  static CommandResult sweeps_[2];
};
fs::path* TwoSweepsTest::dir_ = nullptr;
std::string* TwoSweepsTest::db_ = nullptr;
CommandResult TwoSweepsTest::sweeps_[2];

TEST_F(TwoSweepsTest, CsvStartsWithItsHeaderAndHoldsRawNumbers) {
  ASSERT_EQ(sweeps_[0].exit_code, 0) << sweeps_[0].output;
  EXPECT_EQ(FirstLine(sweeps_[0].output),
            "trial,sweep,workload_hash,backend,tile,tp,ep,graph,attention,"
            "batch,ctx,rung,median_us,p90_us,ci_low_us,ci_high_us,floor_us,"
            "efficiency,"
            "ms_tok,tok_s,rel_err,state,reason");
  EXPECT_EQ(sweeps_[0].output.find('%'), std::string::npos);
  const CommandResult best = Stdout("moetune best --format csv" + Db());
  EXPECT_EQ(best.exit_code, 0);
  EXPECT_THAT(FirstLine(best.output), StartsWith("workload_hash,preset,"));
  EXPECT_THAT(best.output, HasSubstr(",best,"));
  const CommandResult probe = Stdout("moetune probe --device cpu --format csv");
  EXPECT_EQ(probe.exit_code, 0);
  EXPECT_THAT(FirstLine(probe.output), StartsWith("device,device_name,arch"));
  const CommandResult sweeps = Stdout("moetune sweeps --format csv" + Db());
  EXPECT_THAT(sweeps.output, HasSubstr(",quickstart-tiny,FINISHED,14,6,0,"));
  EXPECT_TRUE(std::regex_search(
      sweeps.output, std::regex(",20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z,")));
}

TEST_F(TwoSweepsTest, ProgressIsPlainLinesAndWorkerLogsAreCleanedUp) {
  const std::string err = ReadFile(*dir_ / "night1.err");
  EXPECT_EQ(err.find('\r'), std::string::npos);
  // The running count is the snapshot the trial came with (0 or 1 here).
  EXPECT_TRUE(std::regex_search(
      err, std::regex("\\[14/14\\] running [01], failed 0, elapsed ")))
      << err;
  std::smatch log;
  ASSERT_TRUE(
      std::regex_search(err, log, std::regex("worker log (\\S+\\.log)")))
      << err;
  EXPECT_FALSE(fs::exists(log[1].str())) << log[1].str();
}

TEST_F(TwoSweepsTest, CompareWritesMarkdownAndJsonForCi) {
  const fs::path md = *dir_ / "report.md", json = *dir_ / "report.json";
  const CommandResult compare =
      Stdout("moetune compare --markdown_out " + md.string() + " --json_out " +
             json.string() + Db());
  EXPECT_EQ(compare.exit_code, 0) << compare.output;
  EXPECT_THAT(compare.output, HasSubstr("baseline: sweep 1 'quickstart-tiny'"));
  EXPECT_THAT(ReadFile(md), StartsWith("# moetune compare"));
  google::protobuf::Struct report;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ReadFile(json), &report)
          .ok());
  EXPECT_EQ(report.fields().at("baseline_sweep").number_value(), 1);
  EXPECT_EQ(report.fields().at("target_sweep").number_value(), 2);
  EXPECT_EQ(report.fields().at("compared").number_value(), 6);
  const auto& row = report.fields().at("configs").list_value().values(0);
  for (const char* field : {"baseline_median_us", "target_ci_low_us", "change",
                            "verdict", "target_efficiency"}) {
    EXPECT_TRUE(row.struct_value().fields().contains(field)) << field;
  }
  const CommandResult csv = Stdout("moetune compare --format csv" + Db());
  EXPECT_THAT(FirstLine(csv.output), StartsWith("workload_hash,preset,"));
  // Against itself is a usage error; against nothing earlier, not found.
  EXPECT_EQ(RunCommand(kBin + "/moetune compare --baseline 2" + Db()).exit_code,
            2);
  EXPECT_EQ(RunCommand(kBin + "/moetune compare --sweep 1" + Db()).exit_code,
            1);
}

// "--out -" is standard output, with no warning that "-" looks like a flag.
TEST_F(TwoSweepsTest, ExportToStandardOutputWithoutAWarning) {
  const fs::path err = *dir_ / "export.err";
  const CommandResult exported = Stdout("moetune export --out -" + Db(), err);
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_THAT(exported.output, StartsWith("{"));
  EXPECT_EQ(ReadFile(err), "");
}

// The example spec lists CPU tiles beside GPU backends: each backend that
// leaves them out is named with its own tiles.
TEST_F(TwoSweepsTest, TilesABackendLeavesOutAreSaid) {
  EXPECT_THAT(ReadFile(*dir_ / "night0.err"),
              HasSubstr("moetune: warning: space.tiles: 4x64, 8x128 are not "
                        "tiles of fused_gemv (its tiles: "));
}

// The default table keeps to 120 columns; --wide has every column.
TEST_F(TwoSweepsTest, TablesKeepTo120ColumnsUnlessWide) {
  const CommandResult narrow = Stdout("moetune results" + Db());
  EXPECT_EQ(narrow.exit_code, 0);
  std::istringstream lines(narrow.output);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 120u) << line;
  }
  EXPECT_THAT(FirstLine(narrow.output), ::testing::Not(HasSubstr("p90_us")));
  const CommandResult wide = Stdout("moetune results --wide" + Db());
  EXPECT_THAT(FirstLine(wide.output), HasSubstr("p90_us"));
  EXPECT_THAT(FirstLine(wide.output), HasSubstr("rel_err"));
}

TEST_F(TwoSweepsTest, ExportWritesTheWinnerPerBatchSize) {
  const fs::path out = *dir_ / "moe_configs.json";
  const CommandResult exported =
      RunCommand(kBin + "/moetune export --out " + out.string() + Db());
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
  google::protobuf::Struct configs;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ReadFile(out), &configs)
          .ok());
  ASSERT_TRUE(configs.fields().contains("1"));
  ASSERT_TRUE(configs.fields().contains("4"));
  const auto& one = configs.fields().at("1").struct_value().fields();
  EXPECT_THAT(one.at("moe_backend").string_value(), StartsWith("cpu_"));
  EXPECT_GT(one.at("median_us").number_value(), 0);
}

TEST(CliLogTest, TheCoordinatorLogsEachTrialInUtcAndJsonOnRequest) {
  const fs::path dir = TempDir("cli-logs");
  CoordinatorFlags flags;
  flags.extra = {"--log_format=json"};
  Cluster cluster(dir, flags);
  cluster.AddWorker("e2e:log");
  cluster.WaitForEnd(cluster.Submit(TwelveTrialSpec()));
  const std::string log = ReadFile(dir / "coordinator-0.log");
  int trial_lines = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("trial finished") == std::string::npos) continue;
    ++trial_lines;
    google::protobuf::Struct parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok())
        << line;
    EXPECT_TRUE(std::regex_match(
        parsed.fields().at("time").string_value(),
        std::regex("20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z")));
    EXPECT_EQ(parsed.fields().at("state").string_value(), "DONE");
    EXPECT_GT(parsed.fields().at("median_us").number_value(), 0);
    EXPECT_FALSE(parsed.fields().at("config").string_value().empty());
  }
  EXPECT_EQ(trial_lines, 12) << log;
}

// The nightly gate: last night every config ran; tonight's build crashes
// them. compare --threshold exits 3 and names them now failing.
TEST(CliCompareTest, ARegressionBeyondTheThresholdExitsThree) {
  const fs::path dir = TempDir("cli-regression");
  const fs::path crash = dir / "crash.sh";
  std::ofstream(crash) << "#!/bin/sh\nkill -SEGV $$\n";
  fs::permissions(crash, fs::perms::owner_all);
  Cluster cluster(dir);
  cluster.AddWorker("e2e:good");
  cluster.WaitForEnd(cluster.Submit(TwelveTrialSpec()));
  cluster.worker(0).Signal(SIGTERM);
  cluster.worker(0).Wait();
  cluster.AddWorker("e2e:crashing", crash.string());
  cluster.WaitForEnd(cluster.Submit(TwelveTrialSpec()));
  const std::string compare =
      "(" + kBin + "/moetune compare --coordinator " + cluster.address();
  const CommandResult gated =
      RunCommand(compare + " --threshold 0 --format csv 2>/dev/null)");
  EXPECT_EQ(gated.exit_code, 3) << gated.output;
  EXPECT_THAT(gated.output, HasSubstr(",now-failing,true"));
  // Without a threshold the report is only a report.
  EXPECT_EQ(RunCommand(compare + " 2>/dev/null)").exit_code, 0);
}

}  // namespace
}  // namespace moetune::e2e
