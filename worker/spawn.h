// Spawning a supervised child: its own process group (a kill takes its
// descendants too), stdin / stdout / stderr on pipes whose parent ends the
// caller keeps. Shared by the one-shot trial process (child_process.h) and
// the warm one (warm_process.h). Each call is independent; thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace moetune::worker {

// The parent's ends of a spawned child's standard streams (-1 when closed).
struct ChildPipes {
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
  void CloseAll();
};

// Spawns argv (argv[0] a path) in a new process group. On success returns
// the pid and fills *pipes (stdin non-blocking, so that a stuck child
// cannot block the parent); -1 with *error set otherwise. The first call
// sets SIGPIPE to ignored in this process: writing to a dead child's stdin
// then fails with EPIPE, which the callers report as the child's end.
pid_t SpawnChild(const std::vector<std::string>& argv, ChildPipes* pipes,
                 std::string* error);

// Appends what is readable on fd to *sink, keeping its last keep_tail bytes
// when keep_tail > 0; false at end of file (or a read error).
bool DrainInto(int fd, std::string* sink, size_t keep_tail);

// Waits for pid (retrying on EINTR); its raw wait status.
int ReapChild(pid_t pid);

}  // namespace moetune::worker
