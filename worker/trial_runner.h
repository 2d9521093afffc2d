// TrialRunner: runs one trial in the current process and judges it: the
// backend computes and times; the runner checks the output against the
// reference (a wrong config is INCORRECT, never fast), summarises the raw
// samples, and attaches the roofline floor and the fingerprint. Failures are
// outcomes, never crashes. Thread-compatible (one trial at a time).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "proto/moetune.pb.h"
#include "worker/backend.h"

namespace moetune::worker {

// The workload resolved against its preset (rank 0 of its tp x ep world,
// with the config's attention split); INVALID_ARGUMENT naming the config
// field for an attention the step cannot run (config.attention_split:
// neither ATTENTION_TP nor ATTENTION_DP, or ATTENTION_DP on an MoE layer).
// Reads the config's enums only; TrialRunner::Run moves a config's legacy
// strings into them first (NormalizeLegacyFields).
absl::StatusOr<ref::StepSpec> ResolveStep(const v1::Trial& trial);

// ||out - ref|| / ||ref||; +inf on a size mismatch or any non-finite value.
double RelativeL2Error(const std::vector<float>& out,
                       const std::vector<float>& ref);

// The worst RelativeL2Error of `layers` equal blocks of out and ref (chained
// layers are checked one by one: a wrong layer cannot hide among right
// ones); *layer = that block's index. +inf when the sizes do not split.
double WorstLayerError(const std::vector<float>& out,
                       const std::vector<float>& ref, int layers, int* layer);

// Makes the rendezvous of a gang trial's rank from its execution (gang,
// coordinator address, worker id and token), or says why it cannot.
using RendezvousFactory =
    std::function<absl::StatusOr<std::unique_ptr<GangRendezvous>>(
        const v1::TrialExecution& execution)>;

class TrialRunner {
 public:
  // Without `rendezvous`, a gang trial FAILS saying so.
  // `clock` times the runner's own reference (TrialResult::check_s).
  explicit TrialRunner(BackendRegistry* registry,
                       RendezvousFactory rendezvous = nullptr,
                       const Clock* clock = RealClock::Get())
      : registry_(registry),
        rendezvous_(std::move(rendezvous)),
        clock_(clock) {}
  v1::TrialResult Run(const v1::TrialExecution& execution);

 private:
  // The gang trial's rendezvous, or why there is none.
  absl::StatusOr<std::unique_ptr<GangRendezvous>> RendezvousFor(
      const v1::TrialExecution& execution) const;

  BackendRegistry* registry_;
  RendezvousFactory rendezvous_;
  const Clock* clock_;
};

}  // namespace moetune::worker
