#include "coordinator/load_bench/coordinator_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/spawn_argv.h"

extern char** environ;

namespace moetune::load {
namespace {

// The first stdout line of the process: "listening on A (workers on B)".
std::string ReadFirstLine(int fd, int timeout_ms) {
  std::string line;
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char c;
    if (read(fd, &c, 1) != 1) break;
    if (c == '\n') return line;
    line += c;
  }
  return line;
}

// A "Vm...:  123 kB" field of /proc/<pid>/status, in MiB.
double StatusMib(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (status >> key) {
    if (key == field + ":") {
      double kib = 0;
      status >> kib;
      return kib / 1024.0;
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Start(
    const std::string& binary, const std::string& db_path,
    const std::string& log_path) {
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe");
  std::vector<std::string> args = {binary, "--listen=127.0.0.1:0",
                                   "--worker_listen=127.0.0.1:0",
                                   "--db=" + db_path};
  std::vector<char*> argv = SpawnArgv(args);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::unique_ptr<CoordinatorProcess> process(new CoordinatorProcess());
  const int rc = posix_spawn(&process->pid_, binary.c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return absl::NotFoundError(absl::StrCat("cannot start ", binary));
  }
  const std::string line = ReadFirstLine(out[0], 20000);
  close(out[0]);
  const std::string prefix = "listening on ", mid = " (workers on ";
  const size_t split = line.find(mid);
  if (line.rfind(prefix, 0) != 0 || split == std::string::npos) {
    return absl::UnavailableError(
        absl::StrCat("the coordinator did not start; see ", log_path));
  }
  process->address_ = line.substr(prefix.size(), split - prefix.size());
  process->worker_address_ =
      line.substr(split + mid.size(), line.size() - split - mid.size() - 1);
  return process;
}

double CoordinatorProcess::RssMib() const { return StatusMib(pid_, "VmRSS"); }

double CoordinatorProcess::PeakRssMib() const {
  return StatusMib(pid_, "VmHWM");
}

double CoordinatorProcess::Terminate() {
  if (pid_ <= 0) return -1;
  const auto asked = std::chrono::steady_clock::now();
  kill(pid_, SIGTERM);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - asked > std::chrono::seconds(30)) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - asked)
      .count();
}

CoordinatorProcess::~CoordinatorProcess() {
  if (pid_ > 0) Terminate();
}

}  // namespace moetune::load
