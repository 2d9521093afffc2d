// Process hygiene: a child that must not outlive the process that started
// it (an embedded worker and its CLI; a trial process and its worker).
// Linux-only (prctl, pidfd). Call early in main.
#pragma once

#include <sys/types.h>

namespace moetune {

// Sends `signal` to this process when `ancestor` exits. When `ancestor` is
// the parent the kernel does it (PR_SET_PDEATHSIG); when something sits in
// between (a wrapper such as a profiler that forks), a thread waits on the
// ancestor's pidfd. False when the ancestor is already gone: the caller
// should exit.
bool DieWithAncestor(pid_t ancestor, int signal);

}  // namespace moetune
