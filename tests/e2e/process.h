// Test helpers: start the real binaries as processes, read their output,
// stop them. For the end-to-end tests only.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace moetune::e2e {

class Process {
 public:
  // Starts argv with stdout captured (stderr goes to `log_path`).
  Process(const std::vector<std::string>& argv, const std::string& log_path);
  ~Process();
  // Reads stdout until a line starting with `prefix`; returns the rest of it.
  std::string ReadLineStartingWith(const std::string& prefix, int timeout_ms);
  bool Alive();
  pid_t pid() const { return pid_; }
  void Signal(int signal);
  // Waits for exit; returns the exit status (or 128 + signal).
  int Wait();

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  bool exited_ = false;
  int status_ = 0;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs a command to completion through /bin/sh.
CommandResult RunCommand(const std::string& command);

}  // namespace moetune::e2e
