// Backend: the worker's side of one MoE backend of kernels/backends (its
// descriptor says what it is), and the registry of them all (docs/design.md
// §3: listed is not available; every backend probes). A backend computes and
// times; the TrialRunner judges (correctness against the reference,
// statistics, roofline).
// Backends are used from one thread at a time (one trial per process).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backends/descriptor.h"
#include "kernels/reference/decode_step.h"
#include "proto/moetune.pb.h"
#include "worker/gang_rendezvous.h"

namespace moetune::worker {

// The device a worker drives: -1 = the CPU, else a CUDA ordinal.
struct DeviceTarget {
  int ordinal = -1;
  bool is_gpu() const { return ordinal >= 0; }
};

struct TrialInputs {
  v1::Trial trial;
  ref::StepSpec step;  // the workload resolved against its preset
  DeviceTarget target;
  // A gang trial (MEASURED communication): this process's rank of the gang,
  // and where it meets the other ranks (NCCL id, IPC handles). Both null
  // for a trial one worker runs alone. Owned by the caller of Run.
  const v1::Gang* gang = nullptr;
  GangRendezvous* rendezvous = nullptr;
};

// What a backend hands back; the runner decides what it means.
struct BackendRun {
  std::vector<float> output;       // the region's output, row-major
  std::vector<float> reference;    // a trusted device path's output, or empty
                                   // (then the runner computes the CPU one)
  std::vector<double> samples_us;  // raw timed iterations (us)
  double bytes = 0;                // minimum bytes moved per iteration
  // A gang trial: the step's collectives timed alone (us a step, the
  // median), -1 when nothing was communicated for real.
  double comm_measured_us = -1;
  // Chained MoE layers (workload.chain_layers): output and reference hold
  // `layers` equal blocks, one a layer, each checked on its own.
  int layers = 1;
  // Seconds of the run spent on its untimed checked run(s) and reference
  // (when it came with one), and on warm-ups and timed iterations
  // (TrialResult's check_s and timed_s).
  double check_s = 0;
  double timed_s = 0;
  // A whole step's router choices, [MoE layer][token][top_k] flat, and its
  // indexers' kept sets ([layer][sequence][index_topk] flat, kept_counts
  // of each row used), when the backend reports them (the GPU step): the
  // CPU reference follows them where they are near its own top-k
  // (ref::MoeLayerRoutes, ref::LayerKeptSets).
  std::vector<int> chosen_experts;
  std::vector<int> kept_tokens, kept_counts;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const backends::BackendDescriptor& descriptor() const = 0;
  // Whether this backend can run on `target`, and why not.
  virtual v1::BackendProbe Probe(const DeviceTarget& target) = 0;
  // FAILED_PRECONDITION: this kernel cannot do this shape; INVALID_ARGUMENT:
  // a bad problem; UNAVAILABLE: not on this machine; INTERNAL: a device error.
  virtual absl::StatusOr<BackendRun> Run(const TrialInputs& inputs) = 0;
};

// Lists the descriptor's tiles in a probe (what a worker tells the
// coordinator it can run).
void AddTiles(const backends::BackendDescriptor& descriptor,
              v1::BackendProbe* probe);

class BackendRegistry {
 public:
  void Register(std::unique_ptr<Backend> backend);
  Backend* Find(const std::string& name) const;  // nullptr if unknown
  const std::vector<std::unique_ptr<Backend>>& all() const { return backends_; }

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
};

}  // namespace moetune::worker
