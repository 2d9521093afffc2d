// TrialRunner: runs one trial in the current process and judges it: the
// backend computes and times; the runner checks the output against the
// reference (a wrong config is INCORRECT, never fast), summarises the raw
// samples, and attaches the roofline floor and the fingerprint. Failures are
// outcomes, never crashes. Thread-compatible (one trial at a time).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"
#include "worker/backend.h"

namespace moetune::worker {

// The workload resolved against its preset (rank 0 of its tp x ep world).
absl::StatusOr<ref::StepSpec> ResolveStep(const v1::Trial& trial);

// ||out - ref|| / ||ref||; +inf on a size mismatch or any non-finite value.
double RelativeL2Error(const std::vector<float>& out,
                       const std::vector<float>& ref);

// The worst RelativeL2Error of `layers` equal blocks of out and ref (chained
// layers are checked one by one: a wrong layer cannot hide among right
// ones); *layer = that block's index. +inf when the sizes do not split.
double WorstLayerError(const std::vector<float>& out,
                       const std::vector<float>& ref, int layers, int* layer);

class TrialRunner {
 public:
  explicit TrialRunner(BackendRegistry* registry) : registry_(registry) {}
  v1::TrialResult Run(const v1::TrialExecution& execution);

 private:
  BackendRegistry* registry_;
};

}  // namespace moetune::worker
