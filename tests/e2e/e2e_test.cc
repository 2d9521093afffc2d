// End to end: the real moetune-coordinator and moetune-worker processes on
// loopback, and the moetune CLI, as a user runs them.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace moetune::e2e {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(EndToEndTest, TwoWorkersRecordEveryTrialOfASweep) {
  const fs::path dir = TempDir("two-workers");
  Cluster cluster(dir);
  ASSERT_FALSE(cluster.address().empty());
  cluster.AddWorker("e2e:a");
  cluster.AddWorker("e2e:b");
  const int64_t sweep_id = cluster.Submit(TwelveTrialSpec());
  const v1::Sweep sweep = cluster.WaitForEnd(sweep_id);
  EXPECT_EQ(sweep.state(), v1::FINISHED);
  const std::vector<v1::Trial> trials = cluster.Trials(sweep_id);
  // 2 batches x (cpu_reference + 2 cpu_blocked tiles) x 2 ep: whole decode
  // steps of the tiny preset.
  ASSERT_EQ(trials.size(), 12u);
  int done = 0;
  std::set<std::string> workers;
  for (const v1::Trial& t : trials) {
    ASSERT_EQ(t.state(), v1::DONE) << t.ShortDebugString();
    ++done;
    workers.insert(t.result().worker_id());
    EXPECT_EQ(t.result().samples_us_size(), 3);
    EXPECT_GT(t.result().stats().median_us(), 0);
    // The process's wall time covers at least its timed iterations.
    EXPECT_GE(t.result().wall_s() * 1e6, 3 * t.result().stats().min_us());
    EXPECT_GT(t.result().roofline().floor_us(), 0);
    EXPECT_FALSE(t.result().fingerprint().hash().empty());
    EXPECT_EQ(t.result().roofline().comm_modelled(), t.config().ep() > 1);
  }
  EXPECT_EQ(done, 12);
  EXPECT_EQ(workers.size(), 2u) << "both workers should have run trials";
}

// MEASURED communication needs a gang of GPU workers on one host: on CPU
// workers those trials are UNAVAILABLE saying so, and nothing else of the
// sweep is lost.
TEST(EndToEndTest, MeasuredTrialsOnCpuWorkersAreUnavailableWithTheReason) {
  const fs::path dir = TempDir("measured-on-cpu");
  Cluster cluster(dir);
  cluster.AddWorker("e2e:a");
  cluster.AddWorker("e2e:b");
  v1::SweepSpec spec = TwelveTrialSpec();
  spec.mutable_space()->add_communication(v1::MODELLED);
  spec.mutable_space()->add_communication(v1::MEASURED);
  const int64_t sweep_id = cluster.Submit(spec);
  EXPECT_EQ(cluster.WaitForEnd(sweep_id).state(), v1::FINISHED);
  const std::vector<v1::Trial> trials = cluster.Trials(sweep_id);
  // ep 1 modelled has no collectives, measured is a gang of one; ep 2 is
  // modelled and measured: 6 points of each of the four.
  ASSERT_EQ(trials.size(), 24u);
  int done = 0, unavailable = 0;
  for (const v1::Trial& t : trials) {
    if (t.config().communication() == v1::MEASURED) {
      ++unavailable;
      EXPECT_EQ(t.state(), v1::UNAVAILABLE) << t.ShortDebugString();
      EXPECT_THAT(t.reason(),
                  HasSubstr("MEASURED communication needs GPU workers"));
    } else {
      done += t.state() == v1::DONE;
    }
  }
  EXPECT_EQ(unavailable, 12);
  EXPECT_EQ(done, 12);
}

TEST(EndToEndTest, ACrashOrAHangCostsOneTrialNeverTheWorker) {
  const fs::path dir = TempDir("faults");
  // The first trial process segfaults, the second hangs; the rest run.
  const fs::path wrapper = dir / "faulty.sh";
  std::ofstream(wrapper) << "#!/bin/sh\n"
                         << "if mkdir " << (dir / "crashed") << " 2>/dev/null; "
                         << "then kill -SEGV $$; fi\n"
                         << "if mkdir " << (dir / "hung") << " 2>/dev/null; "
                         << "then sleep 600; fi\n"
                         << "exec \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  Cluster cluster(dir);
  cluster.AddWorker("e2e:faulty", wrapper.string());
  v1::SweepSpec spec = TwelveTrialSpec();
  spec.mutable_space()->clear_ep();
  spec.mutable_space()->add_moe_backends("fused_gemv");  // no GPU: unavailable
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  spec.mutable_measurement()->set_trial_timeout_s(3);
  const int64_t sweep_id = cluster.Submit(spec);
  EXPECT_EQ(cluster.WaitForEnd(sweep_id).state(), v1::FINISHED);
  const std::vector<v1::Trial> trials = cluster.Trials(sweep_id);
  ASSERT_EQ(trials.size(), 8u);
  EXPECT_EQ(trials[3].state(), v1::UNAVAILABLE);
  EXPECT_THAT(trials[3].reason(), HasSubstr("e2e:faulty"));
  EXPECT_EQ(trials[0].state(), v1::FAILED);
  EXPECT_THAT(trials[0].result().reason(), HasSubstr("signal 11"));
  EXPECT_EQ(trials[1].state(), v1::TIMEOUT);
  int done = 0;
  for (const v1::Trial& t : trials) done += t.state() == v1::DONE;
  EXPECT_EQ(done, 4);  // 6 CPU trials, less the two sacrificed
  EXPECT_TRUE(cluster.worker(0).Alive());
}

TEST(EndToEndTest, CliSweepThenBestFromTheDatabaseItLeft) {
  const fs::path dir = TempDir("cli");
  const std::string db = (dir / "cli.db").string();
  const CommandResult sweep =
      RunCommand(kBin + "/moetune sweep --spec " + kSource +
                 "/deploy/example_sweep.json --db " + db + " --gpus 0");
  EXPECT_EQ(sweep.exit_code, 0) << sweep.output;
  EXPECT_THAT(sweep.output, HasSubstr("median_us"));
  EXPECT_THAT(sweep.output, HasSubstr("native_fp4 unavailable"));
  // Where its time went: the trials recorded their checks and timing.
  EXPECT_TRUE(std::regex_search(
      sweep.output,
      std::regex("time: [0-9.]+ s on 1 worker: checks [0-9.]+ s, warm-ups "
                 "and timed iterations [0-9.]+ s; [0-9]+% outside them")))
      << sweep.output;
  const CommandResult best = RunCommand(kBin + "/moetune best --db " + db);
  EXPECT_EQ(best.exit_code, 0) << best.output;
  EXPECT_THAT(best.output, HasSubstr("best:"));
  EXPECT_THAT(best.output,
              ::testing::StartsWith("excluded, for every workload below:\n"));
  const CommandResult csv = RunCommand(
      kBin + "/moetune results --format csv --state DONE --db " + db);
  EXPECT_EQ(csv.exit_code, 0) << csv.output;
  EXPECT_THAT(csv.output, HasSubstr("trial,sweep,workload_hash,backend,tile"));
}

TEST(EndToEndTest, CliRejectsABadSpecNamingTheFieldAndRecordsNothing) {
  const fs::path dir = TempDir("bad-spec");
  const fs::path spec = dir / "bad.json";
  std::ofstream(spec)
      << R"({"workload": {"modelPreset": "tiny", "batchSizes": [1],
    "contextLengths": [16]}, "space": {"moeBackends": ["cpu_blocked"], "tp": [3]}})";
  const std::string db = (dir / "bad.db").string();
  const CommandResult result = RunCommand(kBin + "/moetune sweep --spec " +
                                          spec.string() + " --db " + db);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("space.tp[0]: 3 is not allowed"));
  // Nothing was recorded: the spec was refused before a database was made.
  EXPECT_FALSE(fs::exists(db));
}

TEST(EndToEndTest, BadFlagsAreRejectedNamingTheFlagAndTheAllowedValues) {
  const fs::path dir = TempDir("bad-flags");
  const std::string db = " --db " + (dir / "flags.db").string();
  struct Case {
    std::string command;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"/moetune results --state BOGUS" + db,
       "--state: 'BOGUS' is not allowed; allowed: QUEUED, LEASED, DONE"},
      {"/moetune workers --format xml" + db,
       "--format: 'xml' is not allowed; allowed: table, csv, json"},
      {"/moetune probe --device gpu0",
       "--device: 'gpu0' is not allowed; allowed: cpu, all, 0, 1, ..."},
      {"/moetune cancel" + db, "--sweep: required for cancel"},
      {"/moetune sweep" + db, "--spec: required for sweep"},
      {"/moetune frobnicate" + db, "unknown command 'frobnicate'"},
      {"/moetune-worker --device gpu0",
       "--device: 'gpu0' is not allowed; allowed: cpu or 0, 1, 2, ..."},
  };
  for (const Case& c : cases) {
    const CommandResult result = RunCommand(kBin + c.command);
    EXPECT_EQ(result.exit_code, 2) << c.command << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr(c.message)) << c.command;
  }
}

}  // namespace
}  // namespace moetune::e2e
