#include "worker/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/spawn_argv.h"

extern char** environ;

namespace moetune::worker {

void ChildPipes::CloseAll() {
  for (int* fd : {&stdin_fd, &stdout_fd, &stderr_fd}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

namespace {

void CloseBoth(int* ends) {
  for (int i = 0; i < 2; ++i) {
    if (ends[i] >= 0) close(ends[i]);
    ends[i] = -1;
  }
}

// posix_spawn, not fork: the worker has gRPC threads, and a forked copy of a
// multi-threaded process may only call async-signal-safe functions.
pid_t Spawn(const std::vector<std::string>& argv, int in, int out, int err,
            std::string* error) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, err, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // own group: kill takes descendants
  std::vector<char*> args = SpawnArgv(argv);
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

}  // namespace

pid_t SpawnChild(const std::vector<std::string>& argv, ChildPipes* pipes,
                 std::string* error) {
  // A write to the stdin of a child that died must fail with EPIPE, not
  // kill the supervisor with SIGPIPE (whatever program links this).
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { signal(SIGPIPE, SIG_IGN); });
  if (argv.empty()) {
    *error = "empty command";
    return -1;
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
      pipe2(err, O_CLOEXEC) != 0) {
    *error = std::strerror(errno);
    for (int* p : {in, out, err}) CloseBoth(p);
    return -1;
  }
  const pid_t pid = Spawn(argv, in[0], out[1], err[1], error);
  // The parent keeps only its ends.
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(in[1]);
    close(out[0]);
    close(err[0]);
    return -1;
  }
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  *pipes = ChildPipes{in[1], out[0], err[0]};
  return pid;
}

bool DrainInto(int fd, std::string* sink, size_t keep_tail) {
  char buffer[65536];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  if (n <= 0) return n < 0 && errno == EINTR;
  sink->append(buffer, static_cast<size_t>(n));
  if (keep_tail > 0 && sink->size() > 2 * keep_tail) {
    sink->erase(0, sink->size() - keep_tail);
  }
  return true;
}

int ReapChild(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace moetune::worker
