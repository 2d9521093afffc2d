#include "tests/e2e/process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>

#include "common/spawn_argv.h"

extern char** environ;

namespace moetune::e2e {

Process::Process(const std::vector<std::string>& argv,
                 const std::string& log_path) {
  int out[2];
  if (pipe(out) != 0) return;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args = SpawnArgv(argv);
  if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) !=
      0) {
    pid_ = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  stdout_fd_ = out[0];
}

Process::~Process() {
  if (Alive()) {
    Signal(SIGKILL);
    Wait();
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

std::string Process::ReadLineStartingWith(const std::string& prefix,
                                          int timeout_ms) {
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    size_t newline;
    while ((newline = buffer_.find('\n')) != std::string::npos) {
      const std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
    }
    pollfd fd{stdout_fd_, POLLIN, 0};
    if (poll(&fd, 1, 100) > 0) {
      char chunk[4096];
      const ssize_t n = read(stdout_fd_, chunk, sizeof(chunk));
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }
  return "";
}

bool Process::Alive() {
  if (pid_ < 0 || exited_) return false;
  if (waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
  return !exited_;
}

void Process::Signal(int signal) {
  if (pid_ > 0 && !exited_) kill(pid_, signal);
}

int Process::Wait() {
  if (pid_ > 0 && !exited_) {
    waitpid(pid_, &status_, 0);
    exited_ = true;
  }
  return WIFSIGNALED(status_) ? 128 + WTERMSIG(status_) : WEXITSTATUS(status_);
}

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> chunk;
  size_t n;
  while ((n = fread(chunk.data(), 1, chunk.size(), pipe)) > 0) {
    result.output.append(chunk.data(), n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace moetune::e2e
