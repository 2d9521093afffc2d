#include "coordinator/cli/process_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/spawn_argv.h"

extern char** environ;

namespace moetune::cli {

std::string DescribeExit(const ProcessExit& exit) {
  if (exit.signaled) {
    return absl::StrCat("killed by signal ", exit.code, " (",
                        strsignal(exit.code), ")");
  }
  if (exit.code < 0) return "exit status unknown";
  return absl::StrCat("exit code ", exit.code);
}

absl::StatusOr<pid_t> PosixProcessLauncher::Spawn(
    const std::vector<std::string>& command, const std::string& log_path) {
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
  return pid;
}

std::optional<ProcessExit> PosixProcessLauncher::Poll(pid_t pid) {
  int status = 0;
  const pid_t waited = waitpid(pid, &status, WNOHANG);
  if (waited == 0 || (waited < 0 && errno == EINTR)) return std::nullopt;
  // Not our child any more (reaped elsewhere): gone, how is not known.
  if (waited < 0) return ProcessExit{false, -1};
  if (WIFSIGNALED(status)) return ProcessExit{true, WTERMSIG(status)};
  return ProcessExit{false, WEXITSTATUS(status)};
}

void PosixProcessLauncher::Signal(pid_t pid, int signal) { kill(pid, signal); }

}  // namespace moetune::cli
