#include "coordinator/cli/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/spawn_argv.h"
#include "common/status_macros.h"

extern char** environ;

namespace moetune::cli {

std::string SelfDirectory() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "." : self.parent_path().string();
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
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
  const std::string binary = options.worker_binary.empty()
                                 ? SelfDirectory() + "/moetune-worker"
                                 : options.worker_binary;
  const char* tmp = std::getenv("TMPDIR");
  const std::string log_dir = !options.worker_log_dir.empty()
                                  ? options.worker_log_dir
                              : tmp != nullptr ? tmp
                                               : "/tmp";
  std::vector<std::string> devices;
  for (int gpu = 0; gpu < options.gpu_count; ++gpu)
    devices.push_back(absl::StrCat(gpu));
  if (devices.empty()) devices.push_back("cpu");
  for (const std::string& device : devices) {
    const std::string log = absl::StrCat(log_dir, "/moetune-worker-", getpid(),
                                         "-", device, ".log");
    const EmbeddedWorker worker{binary, cluster->server_->worker_address(),
                                device, getpid(), options.comm_calibration};
    RETURN_IF_ERROR(cluster->SpawnWorker(EmbeddedWorkerCommand(worker), log));
  }
  return cluster;
}

std::vector<std::string> EmbeddedWorkerCommand(const EmbeddedWorker& worker) {
  // The worker stops when its parent dies, however it dies.
  std::vector<std::string> command = {
      worker.binary, "--coordinator=" + worker.coordinator,
      "--device=" + worker.device, "--name=local:" + worker.device,
      absl::StrCat("--parent_pid=", worker.parent_pid)};
  if (!worker.comm_calibration.empty()) {
    command.push_back("--comm_calibration=" + worker.comm_calibration);
  }
  return command;
}

absl::Status LocalCluster::SpawnWorker(const std::vector<std::string>& command,
                                       const std::string& log_path) {
  const std::string& binary = command.front();
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("--worker_binary: ", binary,
                     " is not an executable (build moetune-worker)"));
  }
  std::vector<char*> argv = SpawnArgv(command);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("spawn ", binary, ": ", std::strerror(rc)));
  }
  workers_.push_back(pid);
  worker_logs_.push_back(log_path);
  return absl::OkStatus();
}

void LocalCluster::StopWorkers() {
  for (pid_t pid : workers_) kill(pid, SIGTERM);
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (pid_t pid : workers_) {
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > give_up) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  workers_.clear();
}

LocalCluster::~LocalCluster() {
  StopWorkers();
  if (!keep_logs_) {
    for (const std::string& log : worker_logs_) {
      std::error_code ignored;
      std::filesystem::remove(log, ignored);
    }
  }
  if (server_ != nullptr) server_->Shutdown();
}

}  // namespace moetune::cli
