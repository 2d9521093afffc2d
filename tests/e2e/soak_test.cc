// A sweep of 16 workers under random faults, bounded in time: workers and
// the coordinator killed with -9 and restarted, the database's disk filled
// and freed, stream clients opened and dropped, malformed requests sent.
// At the end every trial is DONE once, no result is lost or duplicated, and
// the database passes integrity_check. Prints the faults it injected.
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/common/loopback_socket.h"
#include "tests/e2e/cluster.h"

namespace moetune::e2e {
namespace {

namespace fs = std::filesystem;

constexpr int kWorkers = 16;
constexpr auto kFaultTime = std::chrono::seconds(40);

// TwelveTrialSpec's 6 configurations (2 backends, cpu_blocked's 2 tiles, ep
// 1 and 2) at batches 1 and 3 and contexts 16, 32 and 64: 36 trials of quick
// tiny decode steps.
v1::SweepSpec SoakSpec() {
  v1::SweepSpec spec = TwelveTrialSpec();
  spec.set_name("soak");
  for (int c : {16, 32}) spec.mutable_workload()->add_context_lengths(c);
  spec.mutable_measurement()->set_max_attempts(10);
  return spec;
}

// Raw bytes at `address` that are not a gRPC request.
void SendGarbage(const std::string& address, std::mt19937& random) {
  const int fd = testing_util::ConnectLoopback(address);
  if (fd < 0) return;
  std::string junk(1 + random() % 4096, '\0');
  for (char& c : junk) c = static_cast<char>(random());
  (void)!send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
  close(fd);
}

// Opens `n` WatchSweep streams to the public API and drops them.
void OpenAndDropStreams(const Cluster& cluster, int64_t sweep_id, int n) {
  auto channel = grpc::CreateChannel(cluster.address(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Moetune::NewStub(channel);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::SweepEvent>>> readers;
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_id);
  for (int i = 0; i < n; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub->WatchSweep(contexts.back().get(), request));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (auto& context : contexts) context->TryCancel();
}

// A submit the coordinator must refuse without recording anything.
void SubmitMalformed(const Cluster& cluster) {
  auto stub = v1::Moetune::NewStub(grpc::CreateChannel(
      cluster.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  v1::SubmitSweepRequest request;
  request.mutable_spec()->set_name(std::string(100000, 'x'));
  v1::SubmitSweepResponse response;
  const grpc::Status status = stub->SubmitSweep(&context, request, &response);
  EXPECT_FALSE(status.ok());
}

void FillAndFree(const fs::path& disk) {
  RunCommand("dd if=/dev/zero of=" + (disk / "filler").string() +
             " bs=64k 2>/dev/null");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  fs::remove(disk / "filler");
}

TEST(SoakTest, SixteenWorkersUnderRandomFaultsFinishEveryTrialOnce) {
  const fs::path dir = TempDir("soak");
  const fs::path disk = dir / "disk";
  fs::create_directories(disk);
  if (mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=16m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  }
  const auto started = std::chrono::steady_clock::now();
  std::map<std::string, int> faults;
  {
    CoordinatorFlags flags;
    flags.db_path = (disk / "e2e.db").string();
    Cluster cluster(dir, flags);
    // Each trial starts 6 s late: the sweep's 36 trials keep the 16 workers
    // busy through the faults.
    const std::string slow = SlowWrapper(dir, 6).string();
    for (int i = 0; i < kWorkers; ++i) {
      cluster.AddWorker("soak:" + std::to_string(i), slow,
                        {"--report_retry_s=5", "--nowarm_trials"});
    }
    const int64_t sweep_id = cluster.Submit(SoakSpec());
    std::mt19937 random(20261207);
    const auto stop = std::chrono::steady_clock::now() + kFaultTime;
    int while_running = 0;
    while (std::chrono::steady_clock::now() < stop) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(300 + random() % 700));
      while_running += cluster.CountInState(sweep_id, v1::DONE) < 36;
      switch (random() % 6) {
        case 0:
          cluster.KillAndRestartWorker(random() % kWorkers);
          ++faults["worker killed and restarted"];
          break;
        case 1:
          cluster.KillAndRestartCoordinator();
          ++faults["coordinator killed and restarted"];
          break;
        case 2:
          FillAndFree(disk);
          ++faults["disk filled and freed"];
          break;
        case 3:
          OpenAndDropStreams(cluster, sweep_id, 8);
          ++faults["8 streams opened and dropped"];
          break;
        case 4:
          SendGarbage(
              random() % 2 ? cluster.address() : cluster.worker_address(),
              random);
          ++faults["garbage bytes sent"];
          break;
        default:
          SubmitMalformed(cluster);
          ++faults["malformed submit"];
          break;
      }
    }
    EXPECT_GT(while_running, 20) << "the sweep ended before the faults did";
    EXPECT_EQ(cluster.WaitForEnd(sweep_id).state(), v1::FINISHED);
    const std::vector<v1::Trial> trials = cluster.Trials(sweep_id);
    std::set<std::string> configs;
    for (const v1::Trial& t : trials) {
      EXPECT_EQ(t.state(), v1::DONE) << t.ShortDebugString();
      EXPECT_TRUE(t.has_result()) << t.ShortDebugString();
      configs.insert(t.workload_hash() + "|" + t.config().ShortDebugString());
    }
    EXPECT_EQ(configs.size(), trials.size()) << "a trial was recorded twice";
    EXPECT_EQ(trials.size(), 36u);
    const CommandResult integrity =
        RunCommand("sqlite3 -readonly " + (disk / "e2e.db").string() +
                   " 'PRAGMA integrity_check'");
    EXPECT_EQ(integrity.output, "ok\n");
    std::printf("soak: %zu trials, %d workers, %d faults while it ran, %.0f s;",
                trials.size(), kWorkers, while_running,
                std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              started)
                    .count());
    for (const auto& [what, n] : faults)
      std::printf(" %d %s;", n, what.c_str());
    std::printf("\n");
  }
  umount2(disk.c_str(), MNT_DETACH);
}

}  // namespace
}  // namespace moetune::e2e
