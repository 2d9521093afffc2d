#include "worker/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace moetune::worker {
namespace {

constexpr size_t kStderrTailBytes = 4096;

struct Pipes {
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  void CloseAll() {
    for (int* p : {in, out, err}) {
      for (int i = 0; i < 2; ++i) {
        if (p[i] >= 0) close(p[i]);
        p[i] = -1;
      }
    }
  }
};

bool OpenPipes(Pipes* pipes) {
  return pipe2(pipes->in, O_CLOEXEC) == 0 &&
         pipe2(pipes->out, O_CLOEXEC) == 0 && pipe2(pipes->err, O_CLOEXEC) == 0;
}

// posix_spawn, not fork: the worker has gRPC threads, and a forked copy of a
// multi-threaded process may only call async-signal-safe functions.
pid_t Spawn(const std::vector<std::string>& argv, Pipes* pipes,
            std::string* error) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipes->in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, pipes->out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipes->err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // own group: kill takes descendants
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    *error = absl::StrCat("spawn ", argv[0], ": ", std::strerror(rc));
    return -1;
  }
  return pid;
}

// Appends what is readable on fd; false at end of file.
bool Drain(int fd, std::string* sink, size_t keep_tail) {
  char buffer[65536];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  if (n <= 0) return n < 0 && errno == EINTR;
  sink->append(buffer, static_cast<size_t>(n));
  if (keep_tail > 0 && sink->size() > 2 * keep_tail) {
    sink->erase(0, sink->size() - keep_tail);
  }
  return true;
}

// Feeds stdin and collects output until both streams close, the deadline
// passes or cancel is set. Returns the kind that ended the wait.
ChildOutcome::Kind Pump(Pipes* pipes, const std::string& stdin_data,
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
    pollfd fds[3] = {{pipes->out[0], POLLIN, 0},
                     {pipes->err[0], POLLIN, 0},
                     {pipes->in[1], POLLOUT, 0}};
    const nfds_t count = pipes->in[1] >= 0 ? 3 : 2;
    if (poll(fds, count, 50) < 0 && errno != EINTR) break;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP)))
      out_open = Drain(pipes->out[0], &out->stdout_data, 0);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP)))
      err_open = Drain(pipes->err[0], &out->stderr_tail, kStderrTailBytes);
    if (count == 3 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(pipes->in[1], stdin_data.data() + written,
                              stdin_data.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      const bool fatal = n < 0 && errno != EAGAIN && errno != EINTR;
      if (fatal || written == stdin_data.size()) {
        close(pipes->in[1]);
        pipes->in[1] = -1;
      }
    }
  }
  return ChildOutcome::Kind::kExited;
}

}  // namespace

ChildOutcome RunChildProcess(const std::vector<std::string>& argv,
                             const std::string& stdin_data,
                             std::chrono::milliseconds deadline,
                             const std::atomic<bool>* cancel) {
  ChildOutcome outcome;
  Pipes pipes;
  if (argv.empty() || !OpenPipes(&pipes)) {
    outcome.error = argv.empty() ? "empty command" : std::strerror(errno);
    pipes.CloseAll();
    return outcome;
  }
  const pid_t pid = Spawn(argv, &pipes, &outcome.error);
  // The parent keeps only its ends.
  for (int* fd : {&pipes.in[0], &pipes.out[1], &pipes.err[1]}) {
    close(*fd);
    *fd = -1;
  }
  if (pid < 0) {
    pipes.CloseAll();
    return outcome;
  }
  fcntl(pipes.in[1], F_SETFL, O_NONBLOCK);  // a stuck child cannot block us
  outcome.kind = Pump(&pipes, stdin_data, deadline, cancel, &outcome);
  if (outcome.kind != ChildOutcome::Kind::kExited) kill(-pid, SIGKILL);
  pipes.CloseAll();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (outcome.kind != ChildOutcome::Kind::kExited) return outcome;
  if (WIFSIGNALED(status)) {
    outcome.kind = ChildOutcome::Kind::kSignaled;
    outcome.signal = WTERMSIG(status);
  } else {
    outcome.exit_code = WEXITSTATUS(status);
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
