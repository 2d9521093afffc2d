// The CLI's embedded workers (coordinator/cli/local_cluster.h): the command
// line each is started with, that LocalCluster hands every worker the
// options' flags (a fake worker binary records its arguments), that it
// notices workers exiting (a fake launcher) and stops only live ones, and
// that a trial its workers held when a sweep was cancelled is not left
// LEASED once they have stopped.
#include "coordinator/cli/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "db/store.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/moetune.grpc.pb.h"
#include "tests/coordinator/test_helpers.h"

namespace moetune::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

EmbeddedWorker Worker(const std::string& comm_calibration) {
  return EmbeddedWorker{"/opt/moetune/moetune-worker", "127.0.0.1:41234", "1",
                        4242, comm_calibration};
}

TEST(EmbeddedWorkerCommandTest, NamesTheCoordinatorDeviceAndParent) {
  EXPECT_THAT(EmbeddedWorkerCommand(Worker("")),
              ElementsAre("/opt/moetune/moetune-worker",
                          "--coordinator=127.0.0.1:41234", "--device=1",
                          "--name=local:1", "--parent_pid=4242"));
}

TEST(EmbeddedWorkerCommandTest, PassesTheCalibrationOnlyWhenGiven) {
  const std::vector<std::string> with =
      EmbeddedWorkerCommand(Worker("/data/h200 comm.json"));
  ASSERT_EQ(with.size(), 6u);
  // One argument, spaces and all: no shell splits it.
  EXPECT_EQ(with.back(), "--comm_calibration=/data/h200 comm.json");
  for (const std::string& arg : EmbeddedWorkerCommand(Worker(""))) {
    EXPECT_THAT(arg, Not(HasSubstr("comm_calibration")));
  }
}

// A stand-in for moetune-worker: writes its arguments, one a line, to
// DIR/args.<pid>, and waits to be stopped.
fs::path FakeWorker(const fs::path& dir) {
  const fs::path script = dir / "fake-worker.sh";
  std::ofstream(script) << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << dir.string()
                        << "/args.$$.tmp\n"
                        << "mv " << dir.string() << "/args.$$.tmp "
                        << dir.string() << "/args.$$\nexec sleep 60\n";
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

// The argument lists the fake workers wrote, once `count` have.
std::vector<std::string> WaitForArgs(const fs::path& dir, size_t count) {
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::string> found;
  while (found.size() < count && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    found.clear();
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("args.", 0) != 0 || name.ends_with(".tmp")) continue;
      std::stringstream text;
      text << std::ifstream(entry.path()).rdbuf();
      found.push_back(text.str());
    }
  }
  return found;
}

TEST(LocalClusterTest, EveryWorkerGetsTheCalibration) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("local-cluster-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  LocalClusterOptions options;
  options.db_path = (dir / "cluster.db").string();
  options.start_workers = true;
  options.worker_binary = FakeWorker(dir).string();
  options.worker_log_dir = dir.string();
  options.gpu_count = 2;
  options.comm_calibration = "/data/comm.json";
  {
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
        LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    const std::vector<std::string> args = WaitForArgs(dir, 2);
    ASSERT_EQ(args.size(), 2u);
    for (const std::string& worker : args) {
      EXPECT_THAT(worker, HasSubstr("\n--comm_calibration=/data/comm.json\n"));
      EXPECT_THAT(worker, HasSubstr("--coordinator=127.0.0.1:"));
    }
  }
  fs::remove_all(dir);
}

// Processes that run until the test says they exit, or until signalled.
// It fails the test when a pid is polled or signalled after it was reaped
// (by then the OS may have given it to another process).
class FakeLauncher final : public ProcessLauncher {
 public:
  absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& command,
                              const std::string& log_path) override {
    commands_.push_back(command);
    logs_.push_back(log_path);
    return next_pid_++;
  }
  std::optional<ProcessExit> Poll(pid_t pid) override {
    EXPECT_FALSE(reaped_.contains(pid)) << "polled " << pid << " once reaped";
    const auto exit = exits_.find(pid);
    if (exit == exits_.end()) return std::nullopt;
    reaped_.insert(pid);
    return exit->second;
  }
  void Signal(pid_t pid, int signal) override {
    EXPECT_FALSE(reaped_.contains(pid)) << "signalled " << pid << " reaped";
    signals_.emplace_back(pid, signal);
    exits_.emplace(pid, ProcessExit{true, signal});
  }
  void Exit(pid_t pid, ProcessExit exit) { exits_.emplace(pid, exit); }

  static constexpr pid_t kFirstPid = 100;
  std::vector<std::vector<std::string>> commands_;
  std::vector<std::string> logs_;
  std::vector<std::pair<pid_t, int>> signals_;

 private:
  pid_t next_pid_ = kFirstPid;
  std::map<pid_t, ProcessExit> exits_;
  std::set<pid_t> reaped_;
};

class LocalClusterWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("local-cluster-workers-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Two GPU workers on the fake launcher: pids 100 and 101.
  std::unique_ptr<LocalCluster> StartTwo() {
    LocalClusterOptions options;
    options.db_path = (dir_ / "cluster.db").string();
    options.start_workers = true;
    options.worker_binary = "/opt/moetune/moetune-worker";
    options.worker_log_dir = dir_.string();
    options.gpu_count = 2;
    options.launcher = &launcher_;
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
        LocalCluster::Start(options);
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    return cluster.ok() ? *std::move(cluster) : nullptr;
  }

  // The coordinator's worker address, as the workers were started with it.
  std::string WorkerAddress() const {
    const std::string flag = "--coordinator=";
    for (const std::string& arg : launcher_.commands_.at(0)) {
      if (arg.starts_with(flag)) return arg.substr(flag.size());
    }
    return "";
  }

  // Registers a worker called `name` at the cluster's coordinator, as the
  // embedded worker of that name does once it has probed.
  v1::RegisterWorkerResponse RegisterAs(const std::string& name) {
    auto control = v1::WorkerControl::NewStub(grpc::CreateChannel(
        WorkerAddress(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::RegisterWorkerRequest registration;
    registration.set_name(name);
    *registration.mutable_probe() = coordinator::CpuWorkerProbe();
    v1::RegisterWorkerResponse registered;
    EXPECT_TRUE(
        control->RegisterWorker(&context, registration, &registered).ok());
    return registered;
  }

  // A sweep of one trial, submitted to `cluster` and leased to a worker
  // that registers as `name` (as the embedded worker of that name would).
  // Returns the trial as granted.
  v1::Trial LeaseTrialTo(const LocalCluster& cluster, const std::string& name) {
    auto api = v1::Moetune::NewStub(grpc::CreateChannel(
        cluster.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext submit_context;
    v1::SubmitSweepRequest submit;
    v1::SweepSpec& spec = *submit.mutable_spec();
    spec.set_name("lease");
    spec.mutable_workload()->set_model_preset("tiny");
    spec.mutable_workload()->add_batch_sizes(1);
    spec.mutable_workload()->add_context_lengths(16);
    spec.mutable_workload()->set_region(v1::MOE_LAYER);
    spec.mutable_space()->add_moe_backends("cpu_reference");
    v1::SubmitSweepResponse submitted;
    EXPECT_TRUE(api->SubmitSweep(&submit_context, submit, &submitted).ok());
    const v1::RegisterWorkerResponse registered = RegisterAs(name);
    auto control = v1::WorkerControl::NewStub(grpc::CreateChannel(
        WorkerAddress(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext acquire_context;
    v1::AcquireTrialRequest acquire;
    acquire.set_worker_id(registered.worker_id());
    acquire.set_token(registered.token());
    v1::AcquireTrialResponse granted;
    EXPECT_TRUE(
        control->AcquireTrial(&acquire_context, acquire, &granted).ok());
    EXPECT_TRUE(granted.granted());
    return granted.trial();
  }

  // Cancels the sweep as `moetune sweep` does on Ctrl-C and when its
  // workers have all exited.
  static void CancelSweep(const LocalCluster& cluster, int64_t sweep_id) {
    auto api = v1::Moetune::NewStub(grpc::CreateChannel(
        cluster.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::CancelSweepRequest request;
    request.set_sweep_id(sweep_id);
    v1::Sweep sweep;
    const grpc::Status status = api->CancelSweep(&context, request, &sweep);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(sweep.state(), v1::ABORTED);
  }

  // The trial as the database holds it once the cluster has stopped.
  v1::Trial StoredTrial(int64_t trial_id) const {
    absl::StatusOr<std::unique_ptr<db::Store>> store = db::Store::Open(
        (dir_ / "cluster.db").string(), db::OpenOptions{.writer = false});
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return v1::Trial();
    absl::StatusOr<v1::Trial> trial = (*store)->GetTrial(trial_id);
    EXPECT_TRUE(trial.ok()) << trial.status();
    return trial.value_or(v1::Trial());
  }

  fs::path dir_;
  FakeLauncher launcher_;
};

TEST_F(LocalClusterWorkersTest, UnavailableOnlyOnceEveryWorkerHasExited) {
  std::unique_ptr<LocalCluster> cluster = StartTwo();
  ASSERT_NE(cluster, nullptr);
  ASSERT_EQ(launcher_.logs_.size(), 2u);
  std::vector<std::string> exited;
  EXPECT_TRUE(cluster->CheckWorkers(&exited).ok());
  EXPECT_THAT(exited, IsEmpty());
  EXPECT_FALSE(cluster->any_worker_exited());

  launcher_.Exit(FakeLauncher::kFirstPid, ProcessExit{false, 2});
  EXPECT_TRUE(cluster->CheckWorkers(&exited).ok());  // local:1 still runs
  EXPECT_THAT(exited, ElementsAre("worker local:0 exited (exit code 2); its "
                                  "log: " +
                                  launcher_.logs_[0]));
  exited.clear();
  EXPECT_TRUE(cluster->CheckWorkers(&exited).ok());
  EXPECT_THAT(exited, IsEmpty());  // each exit is said once
  EXPECT_TRUE(cluster->any_worker_exited());

  launcher_.Exit(FakeLauncher::kFirstPid + 1, ProcessExit{true, SIGKILL});
  const absl::Status gone = cluster->CheckWorkers(&exited);
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(gone.message(),
              HasSubstr("every embedded worker has exited: local:0 (exit code "
                        "2; log " +
                        launcher_.logs_[0] + "), local:1 (killed by signal 9"));
  EXPECT_THAT(gone.message(), HasSubstr("; log " + launcher_.logs_[1] + ")"));
  cluster.reset();
  EXPECT_THAT(launcher_.signals_, IsEmpty());  // nothing left to stop
}

// Only once every embedded worker has registered does the cluster tell
// its scheduler that no other worker will come (a worker of another name
// does not count).
TEST_F(LocalClusterWorkersTest, AllRegisteredOnlyOnceEveryWorkerIs) {
  std::unique_ptr<LocalCluster> cluster = StartTwo();
  ASSERT_NE(cluster, nullptr);
  std::vector<std::string> exited;
  ASSERT_TRUE(cluster->CheckWorkers(&exited).ok());
  EXPECT_FALSE(cluster->all_workers_registered());
  RegisterAs("local:0");
  RegisterAs("elsewhere:0");
  ASSERT_TRUE(cluster->CheckWorkers(&exited).ok());
  EXPECT_FALSE(cluster->all_workers_registered());
  RegisterAs("local:1");
  ASSERT_TRUE(cluster->CheckWorkers(&exited).ok());
  EXPECT_TRUE(cluster->all_workers_registered());
}

// A worker that exited before all registered: the grace stays (the dead
// one might have run what the others cannot).
TEST_F(LocalClusterWorkersTest, NotAllRegisteredWhenOneHasExited) {
  std::unique_ptr<LocalCluster> cluster = StartTwo();
  ASSERT_NE(cluster, nullptr);
  RegisterAs("local:1");
  launcher_.Exit(FakeLauncher::kFirstPid, ProcessExit{false, 1});
  std::vector<std::string> exited;
  ASSERT_TRUE(cluster->CheckWorkers(&exited).ok());
  EXPECT_FALSE(cluster->all_workers_registered());
}

TEST_F(LocalClusterWorkersTest, StoppingSignalsOnlyTheWorkersStillRunning) {
  std::unique_ptr<LocalCluster> cluster = StartTwo();
  ASSERT_NE(cluster, nullptr);
  launcher_.Exit(FakeLauncher::kFirstPid, ProcessExit{false, 1});
  std::vector<std::string> exited;
  ASSERT_TRUE(cluster->CheckWorkers(&exited).ok());
  cluster.reset();
  EXPECT_THAT(launcher_.signals_, ElementsAre(std::make_pair(
                                      FakeLauncher::kFirstPid + 1, SIGTERM)));
}

// A sweep whose last worker exits just after another died mid-trial: the
// sweep is cancelled, no report comes for the dead worker's trial, and the
// coordinator stops before its lease could lapse. The trial ends CANCELLED,
// saying whose lease it was, rather than staying LEASED for good.
TEST_F(LocalClusterWorkersTest, ADeadWorkersTrialEndsCancelledWithTheSweep) {
  std::unique_ptr<LocalCluster> cluster = StartTwo();
  ASSERT_NE(cluster, nullptr);
  const v1::Trial trial = LeaseTrialTo(*cluster, "local:0");
  launcher_.Exit(FakeLauncher::kFirstPid, ProcessExit{true, SIGKILL});
  launcher_.Exit(FakeLauncher::kFirstPid + 1, ProcessExit{false, 2});
  std::vector<std::string> exited;
  ASSERT_EQ(cluster->CheckWorkers(&exited).code(),
            absl::StatusCode::kUnavailable);
  CancelSweep(*cluster, trial.sweep_id());
  cluster.reset();
  const v1::Trial stored = StoredTrial(trial.trial_id());
  EXPECT_EQ(stored.state(), v1::CANCELLED) << stored.ShortDebugString();
  EXPECT_EQ(stored.reason(),
            "sweep cancelled; worker local:0 exited before reporting it: "
            "killed by signal 9 (Killed)");
  EXPECT_EQ(stored.attempt(), 1);
  EXPECT_EQ(stored.worker_id(), trial.worker_id());
}

// Ctrl-C: the sweep is cancelled, then the workers are stopped before any
// heartbeat could tell them so; the trial one was running ends CANCELLED.
TEST_F(LocalClusterWorkersTest, ATrialRunningAtCtrlCEndsCancelled) {
  std::unique_ptr<LocalCluster> cluster = StartTwo();
  ASSERT_NE(cluster, nullptr);
  const v1::Trial trial = LeaseTrialTo(*cluster, "local:1");
  CancelSweep(*cluster, trial.sweep_id());
  cluster.reset();
  ASSERT_EQ(launcher_.signals_.size(), 2u);  // both stopped, by SIGTERM
  const v1::Trial stored = StoredTrial(trial.trial_id());
  EXPECT_EQ(stored.state(), v1::CANCELLED) << stored.ShortDebugString();
  EXPECT_THAT(stored.reason(),
              HasSubstr("sweep cancelled; worker local:1 exited before "
                        "reporting it: killed by signal 15"));
}

TEST_F(LocalClusterWorkersTest, WithoutWorkersNothingIsMissing) {
  LocalClusterOptions options;
  options.db_path = (dir_ / "query.db").string();
  options.launcher = &launcher_;
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<std::string> exited;
  EXPECT_TRUE((*cluster)->CheckWorkers(&exited).ok());
  EXPECT_THAT(launcher_.logs_, IsEmpty());
}

// The real launcher: a worker binary that fails at once is seen to exit,
// with its exit code, and its log is kept when asked.
TEST_F(LocalClusterWorkersTest, ARealWorkerThatExitsAtStartIsNoticed) {
  const fs::path script = dir_ / "failing-worker.sh";
  std::ofstream(script) << "#!/bin/sh\necho 'bad value' >&2\nexit 3\n";
  fs::permissions(script, fs::perms::owner_all);
  LocalClusterOptions options;
  options.db_path = (dir_ / "real.db").string();
  options.start_workers = true;
  options.worker_binary = script.string();
  options.worker_log_dir = dir_.string();
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  (*cluster)->set_keep_logs(true);
  const std::string log = (*cluster)->worker_logs().at(0);
  absl::Status status;
  std::vector<std::string> exited;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((status = (*cluster)->CheckWorkers(&exited)).ok() &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_THAT(status.message(), HasSubstr("local:cpu (exit code 3; log "));
  cluster->reset();
  EXPECT_THAT(LastLines(log, 5), ElementsAre("bad value"));
}

TEST(LastLinesTest, KeepsTheEndOfTheFileInWholeLines) {
  const fs::path path = fs::path(::testing::TempDir()) /
                        ("last-lines-" + std::to_string(getpid()) + ".log");
  std::ofstream(path) << "one\ntwo\nthree\nfour\n\n";
  EXPECT_THAT(LastLines(path.string(), 2), ElementsAre("three", "four"));
  EXPECT_THAT(LastLines(path.string(), 9),
              ElementsAre("one", "two", "three", "four"));
  {
    // Past what is read of a long log, the first line kept is whole.
    std::ofstream long_log(path);
    for (int i = 0; i < 2000; ++i) long_log << std::string(99, 'x') << "\n";
    long_log << "the end";
  }
  const std::vector<std::string> lines = LastLines(path.string(), 100000);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), std::string(99, 'x'));
  EXPECT_EQ(lines.back(), "the end");
  fs::remove(path);
  EXPECT_THAT(LastLines(path.string(), 5), IsEmpty());
}

TEST(DescribeExitTest, SaysHowTheProcessEnded) {
  EXPECT_EQ(DescribeExit(ProcessExit{false, 2}), "exit code 2");
  EXPECT_EQ(DescribeExit(ProcessExit{true, SIGKILL}),
            "killed by signal 9 (Killed)");
  EXPECT_EQ(DescribeExit(ProcessExit{false, -1}), "exit status unknown");
}

}  // namespace
}  // namespace moetune::cli
