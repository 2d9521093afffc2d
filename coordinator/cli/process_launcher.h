// The OS calls behind the CLI's embedded workers (local_cluster.h): start a
// process with its stdout and stderr in a log file, learn whether it has
// exited, signal it. PosixProcessLauncher makes them (posix_spawn, waitpid,
// kill); tests hand LocalCluster a fake, so that a worker dying at its
// start is a line of test code rather than a real process.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace moetune::cli {

// How a process ended.
struct ProcessExit {
  bool signaled = false;
  int code = 0;  // the exit code, or the signal when `signaled`; -1: unknown
};

// "exit code 2", "killed by signal 9 (Killed)", "exit status unknown".
std::string DescribeExit(const ProcessExit& exit);

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts `command` (command[0] a path) with stdout and stderr in
  // `log_path` (truncated). NotFound when command[0] is not an executable.
  virtual absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& command,
                                      const std::string& log_path) = 0;
  // How `pid` (started by Spawn) ended, once it has; nullopt while it
  // runs. The first answer reaps it: the pid may then be reused by another
  // process, so it must be neither polled nor signalled again.
  virtual std::optional<ProcessExit> Poll(pid_t pid) = 0;
  virtual void Signal(pid_t pid, int signal) = 0;
};

class PosixProcessLauncher final : public ProcessLauncher {
 public:
  absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& command,
                              const std::string& log_path) override;
  std::optional<ProcessExit> Poll(pid_t pid) override;
  void Signal(pid_t pid, int signal) override;
};

}  // namespace moetune::cli
