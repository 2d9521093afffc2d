#include "coordinator/cli/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace moetune::cli {
namespace {

ProcessLauncher* OsLauncher() {
  static PosixProcessLauncher* launcher = new PosixProcessLauncher();
  return launcher;
}

// The name a worker registers with, and the CLI calls it by.
std::string WorkerName(const std::string& device) { return "local:" + device; }

std::string LogDirectory(const LocalClusterOptions& options) {
  if (!options.worker_log_dir.empty()) return options.worker_log_dir;
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

}  // namespace

std::string SelfDirectory() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "." : self.parent_path().string();
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(
      options.launcher != nullptr ? options.launcher : OsLauncher()));
  coordinator::ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.worker_listen = "127.0.0.1:0";
  server_options.db_path = options.db_path;
  server_options.read_only = options.read_only;
  server_options.scheduler.lease_ms = 10000;
  server_options.scheduler.heartbeat_interval_ms = 500;
  ASSIGN_OR_RETURN(cluster->server_, coordinator::CoordinatorServer::Start(
                                         server_options, RealClock::Get()));
  if (!options.start_workers) return cluster;
  // On an error the workers already started are stopped with the cluster.
  RETURN_IF_ERROR(cluster->StartWorkers(options));
  return cluster;
}

absl::Status LocalCluster::StartWorkers(const LocalClusterOptions& options) {
  const std::string binary = options.worker_binary.empty()
                                 ? SelfDirectory() + "/moetune-worker"
                                 : options.worker_binary;
  const std::string log_dir = LogDirectory(options);
  std::vector<std::string> devices;
  for (int gpu = 0; gpu < options.gpu_count; ++gpu)
    devices.push_back(absl::StrCat(gpu));
  if (devices.empty()) devices.push_back("cpu");
  for (const std::string& device : devices) {
    const std::string log = absl::StrCat(log_dir, "/moetune-worker-", getpid(),
                                         "-", device, ".log");
    const EmbeddedWorker worker{binary, server_->worker_address(), device,
                                getpid(), options.comm_calibration};
    ASSIGN_OR_RETURN(const pid_t pid,
                     launcher_->Spawn(EmbeddedWorkerCommand(worker), log));
    absl::MutexLock lock(&mu_);
    workers_.push_back(Worker{WorkerName(device), pid, log, std::nullopt});
    worker_logs_.push_back(log);
  }
  return absl::OkStatus();
}

std::vector<std::string> EmbeddedWorkerCommand(const EmbeddedWorker& worker) {
  // The worker stops when its parent dies, however it dies.
  std::vector<std::string> command = {
      worker.binary, "--coordinator=" + worker.coordinator,
      "--device=" + worker.device, "--name=" + WorkerName(worker.device),
      absl::StrCat("--parent_pid=", worker.parent_pid)};
  if (!worker.comm_calibration.empty()) {
    command.push_back("--comm_calibration=" + worker.comm_calibration);
  }
  return command;
}

absl::Status LocalCluster::CheckWorkers(std::vector<std::string>* exited_now) {
  absl::MutexLock lock(&mu_);
  bool running = false;
  std::vector<std::string> exits;
  for (Worker& worker : workers_) {
    if (!worker.exit.has_value()) {
      worker.exit = launcher_->Poll(worker.pid);
      if (!worker.exit.has_value()) {
        running = true;
        continue;
      }
      exited_now->push_back(absl::StrCat("worker ", worker.name, " exited (",
                                         DescribeExit(*worker.exit),
                                         "); its log: ", worker.log));
    }
    exits.push_back(absl::StrCat(worker.name, " (", DescribeExit(*worker.exit),
                                 "; log ", worker.log, ")"));
  }
  if (!all_registered_ && running && exits.empty()) {
    all_registered_ =
        std::all_of(workers_.begin(), workers_.end(), [this](const Worker& w) {
          return server_->scheduler()->HasLiveWorker(w.name);
        });
    if (all_registered_) server_->scheduler()->NoMoreWorkersExpected();
  }
  if (running || workers_.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "every embedded worker has exited: ", absl::StrJoin(exits, ", ")));
}

bool LocalCluster::all_workers_registered() {
  absl::MutexLock lock(&mu_);
  return all_registered_;
}

bool LocalCluster::any_worker_exited() {
  absl::MutexLock lock(&mu_);
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const Worker& w) { return w.exit.has_value(); });
}

bool LocalCluster::AwaitExits(int deadline_ms) {
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      bool running = false;
      for (Worker& worker : workers_) {
        if (!worker.exit.has_value()) worker.exit = launcher_->Poll(worker.pid);
        running |= !worker.exit.has_value();
      }
      if (!running) return true;
    }
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void LocalCluster::StopWorkers() {
  // Only the workers not yet reaped: a reaped one's pid may be another
  // process's by now.
  for (const int sig : {SIGTERM, SIGKILL}) {
    {
      absl::MutexLock lock(&mu_);
      for (const Worker& worker : workers_) {
        if (!worker.exit.has_value()) launcher_->Signal(worker.pid, sig);
      }
    }
    // After SIGKILL, one that still does not exit is stuck in the kernel;
    // the CLI exits without it rather than hang.
    if (AwaitExits(10000)) return;
  }
}

// The coordinator stops with the cluster, so no lease a stopped worker held
// would ever lapse, and no other worker could ever take it up: without this
// a trial a worker was running when the sweep was cancelled (at Ctrl-C, or
// one that died just before the last worker exited) would stay LEASED for
// good.
void LocalCluster::ReleaseLeases() {
  if (server_ == nullptr) return;
  absl::MutexLock lock(&mu_);
  for (const Worker& worker : workers_) {
    // One that did not exit even after SIGKILL is left to its lease.
    if (!worker.exit.has_value()) continue;
    const absl::Status released = server_->scheduler()->ReleaseStoppedWorker(
        worker.name,
        absl::StrCat("worker ", worker.name, " exited before reporting it: ",
                     DescribeExit(*worker.exit)));
    if (!released.ok()) {
      LogError("the trials of worker ", worker.name,
               " stay LEASED: ", released.message());
    }
  }
}

LocalCluster::~LocalCluster() {
  StopWorkers();
  ReleaseLeases();
  if (!keep_logs_) {
    for (const std::string& log : worker_logs_) {
      std::error_code ignored;
      std::filesystem::remove(log, ignored);
    }
  }
  if (server_ != nullptr) server_->Shutdown();
}

std::vector<std::string> LastLines(const std::string& path, int count) {
  std::ifstream in(path, std::ios::binary);
  if (!in || count <= 0) return {};
  // A long sweep's log can be large; its end is enough.
  constexpr std::streamoff kTail = 64 * 1024;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - kTail));
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  const absl::string_view kept = absl::StripTrailingAsciiWhitespace(text);
  if (kept.empty()) return {};
  std::vector<std::string> lines = absl::StrSplit(kept, '\n');
  if (size > kTail) lines.erase(lines.begin());  // it starts mid-line
  if (lines.size() > static_cast<size_t>(count)) {
    lines.erase(lines.begin(), lines.end() - count);
  }
  return lines;
}

}  // namespace moetune::cli
