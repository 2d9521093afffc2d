#include "common/process.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace moetune {
namespace {

// Blocks until the process behind `pidfd` exits, then sends `signal` to
// this process.
void WatchAncestor(int pidfd, int signal) {
  pollfd fd{pidfd, POLLIN, 0};
  while (poll(&fd, 1, -1) < 0) {
  }
  kill(getpid(), signal);
}

}  // namespace

bool DieWithAncestor(pid_t ancestor, int signal) {
  if (prctl(PR_SET_PDEATHSIG, signal) != 0) return false;
  if (getppid() == ancestor) return true;
  // pidfd_open (Linux 5.3): a handle that cannot be confused with a later
  // process reusing the pid.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, ancestor, 0));
  if (pidfd >= 0) {
    std::thread(WatchAncestor, pidfd, signal).detach();
    return true;
  }
  // No pidfd here (an old kernel, a seccomp filter): the parent's death
  // signal alone, as long as the ancestor still exists.
  return errno != ESRCH && kill(ancestor, 0) == 0;
}

}  // namespace moetune
