// The CLI's embedded workers (coordinator/cli/local_cluster.h): the command
// line each is started with, and that LocalCluster hands every worker the
// options' flags (a fake worker binary records its arguments).
#include "coordinator/cli/local_cluster.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
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

}  // namespace
}  // namespace moetune::cli
