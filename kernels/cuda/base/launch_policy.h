// LaunchPolicy: how a launch function enqueues its kernels (launch.cuh
// carries it out). A plain value; thread-safe to copy.
#pragma once

namespace moetune::gpu {

// How a launch function enqueues its kernels: an explicit argument of every
// function that launches through LaunchOverlapped, so that the caller who
// knows the schedule (a fork, a join, a measured carveout) decides it.
struct LaunchPolicy {
  // Overlapped with the kernel before it on the stream (programmatic
  // dependent launch); false: scheduled after that kernel has drained.
  bool overlap = true;
  // The first kernel the launch function enqueues goes plainly whatever
  // `overlap` says; the ones after it follow `overlap` (Then()). For the
  // kernel after a fork or a join of streams: an overlapped launch waits only
  // for the kernel before it in its own stream, and nothing promises that it
  // also waits for an event waited on between.
  bool plain_first = false;
  // Each launch asks the SMs for only the shared memory its grid needs
  // (carveout.h FittedCarveout); false: the driver's split. An SM keeps the
  // split of the kernel before it, so a step that fits some launches fits
  // them all but those measured slower fitted.
  bool fit_carveout = false;
  // Kernels that can start their weights' trip to memory before waiting for
  // the kernel before them do (the one- and two-sequence BF16 GEMVs stage
  // their first rounds in shared memory); false: every read after the wait.
  // Off by default: the staged GEMV has not yet beaten the plain one in the
  // step (kernels/cuda/step/PERF.md, the link bound).
  bool weights_ahead = false;

  // This policy for the kernels after a launch function's first one.
  LaunchPolicy Then() const {
    LaunchPolicy next = *this;
    next.plain_first = false;
    return next;
  }
  // This policy with its first kernel launched plainly.
  LaunchPolicy PlainFirst() const {
    LaunchPolicy plain = *this;
    plain.plain_first = true;
    return plain;
  }
  // This policy at the driver's carveout.
  LaunchPolicy DriverCarveout() const {
    LaunchPolicy driver = *this;
    driver.fit_carveout = false;
    return driver;
  }
};

}  // namespace moetune::gpu
