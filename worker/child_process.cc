#include "worker/child_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/spawn.h"

namespace moetune::worker {
namespace {

constexpr size_t kStderrTailBytes = 4096;

// Feeds stdin and collects output until both streams close, the deadline
// passes or cancel is set. Returns the kind that ended the wait.
ChildOutcome::Kind Pump(ChildPipes* pipes, const std::string& stdin_data,
                        std::chrono::milliseconds deadline,
                        const std::atomic<bool>* cancel, ChildOutcome* out) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  size_t written = 0;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    if (cancel != nullptr && cancel->load())
      return ChildOutcome::Kind::kCancelled;
    if (std::chrono::steady_clock::now() > end)
      return ChildOutcome::Kind::kTimedOut;
    pollfd fds[3] = {{pipes->stdout_fd, POLLIN, 0},
                     {pipes->stderr_fd, POLLIN, 0},
                     {pipes->stdin_fd, POLLOUT, 0}};
    const nfds_t count = pipes->stdin_fd >= 0 ? 3 : 2;
    if (poll(fds, count, 50) < 0 && errno != EINTR) break;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP)))
      out_open = DrainInto(pipes->stdout_fd, &out->stdout_data, 0);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP)))
      err_open =
          DrainInto(pipes->stderr_fd, &out->stderr_tail, kStderrTailBytes);
    if (count == 3 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(pipes->stdin_fd, stdin_data.data() + written,
                              stdin_data.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      const bool fatal = n < 0 && errno != EAGAIN && errno != EINTR;
      if (fatal || written == stdin_data.size()) {
        close(pipes->stdin_fd);
        pipes->stdin_fd = -1;
      }
    }
  }
  return ChildOutcome::Kind::kExited;
}

}  // namespace

void SetExitStatus(int status, ChildOutcome* outcome) {
  if (WIFSIGNALED(status)) {
    outcome->kind = ChildOutcome::Kind::kSignaled;
    outcome->signal = WTERMSIG(status);
  } else {
    outcome->kind = ChildOutcome::Kind::kExited;
    outcome->exit_code = WEXITSTATUS(status);
  }
}

ChildOutcome RunChildProcess(const std::vector<std::string>& argv,
                             const std::string& stdin_data,
                             std::chrono::milliseconds deadline,
                             const std::atomic<bool>* cancel) {
  ChildOutcome outcome;
  ChildPipes pipes;
  const pid_t pid = SpawnChild(argv, &pipes, &outcome.error);
  if (pid < 0) return outcome;
  outcome.kind = Pump(&pipes, stdin_data, deadline, cancel, &outcome);
  if (outcome.kind != ChildOutcome::Kind::kExited) kill(-pid, SIGKILL);
  pipes.CloseAll();
  const int status = ReapChild(pid);
  if (outcome.kind == ChildOutcome::Kind::kExited) {
    SetExitStatus(status, &outcome);
  }
  return outcome;
}

std::string DescribeOutcome(const ChildOutcome& outcome) {
  switch (outcome.kind) {
    case ChildOutcome::Kind::kExited:
      return absl::StrCat("trial process exited with status ",
                          outcome.exit_code);
    case ChildOutcome::Kind::kSignaled:
      return absl::StrCat("trial process killed by signal ", outcome.signal,
                          " (", strsignal(outcome.signal), ")");
    case ChildOutcome::Kind::kTimedOut:
      return "trial process passed its deadline and was killed";
    case ChildOutcome::Kind::kCancelled:
      return "trial cancelled: its sweep was cancelled";
    case ChildOutcome::Kind::kSpawnFailed:
      return absl::StrCat("could not start the trial process: ", outcome.error);
  }
  return "unknown";
}

}  // namespace moetune::worker
