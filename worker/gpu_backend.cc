#include "worker/gpu_backend.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/backends/tile_shape.h"
#include "kernels/cuda/step/step_problem.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/router.h"
#include "kernels/reference/step_bytes.h"
#include "worker/cpu_backend.h"
#include "worker/gang_comm_setup.h"

namespace moetune::worker {
namespace {

gpu::MoeProblem MakeProblem(const TrialInputs& in) {
  const model::ModelConfig& c = in.step.config;
  const int layer = FirstMoeLayer(in.step);
  gpu::MoeProblem problem;
  problem.dims = {c.hidden,
                  c.moe_intermediate,
                  c.num_experts,
                  c.experts_per_token,
                  c.num_shared_experts,
                  c.routed_scaling};
  problem.seed = in.step.seed;
  problem.layer = layer;
  problem.batch = in.step.batch;
  problem.router_bias = ref::RouterBias(in.step, layer);
  problem.input = ref::MoeLayerInput(in.step, layer);
  problem.shard = {in.step.shard.tp, in.step.shard.ep, in.step.shard.rank};
  return problem;
}

gpu::MoeRunOptions MakeOptions(const TrialInputs& in, const std::string& name) {
  const v1::TrialConfig& config = in.trial.config();
  gpu::MoeRunOptions options;
  options.backend = name;
  options.tile = backends::TileOf(config.tile());
  options.cuda_graph = config.cuda_graph();
  options.warmup = in.trial.measurement().warmup_iterations();
  options.iterations = in.trial.measurement().iterations();
  options.device = in.target.ordinal;
  // A normalised workload says 0 for one layer (tuner/spec.h).
  options.chain_layers = std::max(1, in.trial.workload().chain_layers());
  // At real dims the CPU reference of a whole MoE layer takes minutes; the
  // trusted GPU path (plain kernels straight from the weight hash, itself
  // checked against the CPU in the tests) is the oracle there (docs/design.md
  // §3),
  // and for every layer of a chain (all fed the first layer's input and
  // bias, which the CPU reference does not model). Small presets alone use
  // the CPU reference.
  options.compute_reference =
      in.step.config.hidden > 1024 || options.chain_layers > 1;
  return options;
}

gpu::StepRunOptions MakeStepOptions(const TrialInputs& in,
                                    const std::string& name) {
  const gpu::MoeRunOptions layer = MakeOptions(in, name);
  gpu::StepRunOptions options;
  options.backend = layer.backend;
  options.tile = layer.tile;
  options.cuda_graph = layer.cuda_graph;
  options.warmup = layer.warmup;
  options.iterations = layer.iterations;
  options.device = layer.device;
  // The CPU reference step at small dims; at real dims (minutes on the CPU)
  // every MoE layer against the trusted path on its own input (the step's
  // other kernels are checked against the CPU by the GPU tests).
  options.compute_reference = in.step.config.hidden > 1024;
  return options;
}

// A gang trial's rank joining its gang: the largest sum the step makes is
// a block's output [batch][hidden] or the [world][batch] table of tokens;
// set-up may take half the trial's deadline.
GangJoin GangJoinOf(const TrialInputs& in) {
  GangJoin join;
  join.gang = in.gang;
  join.all_reduce = in.trial.config().all_reduce_impl();
  join.device = in.target.ordinal;
  const int64_t world = in.gang->world_size();
  join.max_floats =
      std::max<int64_t>(int64_t{in.step.batch} * in.step.config.hidden,
                        2 * in.step.batch * world);
  const double timeout_s = in.trial.measurement().trial_timeout_s();
  join.timeout = absl::Seconds(timeout_s > 0 ? timeout_s / 2 : 60);
  return join;
}

class GpuMoeBackend final : public Backend {
 public:
  GpuMoeBackend(const backends::BackendDescriptor& descriptor, GpuApi* gpu)
      : descriptor_(descriptor), name_(descriptor.name), gpu_(gpu) {}
  const backends::BackendDescriptor& descriptor() const override {
    return descriptor_;
  }

  v1::BackendProbe Probe(const DeviceTarget& target) override {
    v1::BackendProbe probe;
    probe.set_name(name_);
    if (!target.is_gpu()) {
      probe.set_reason(
          "GPU backend; this worker runs on the CPU (--device cpu)");
    } else if (const std::string refusal = DeviceRefusal(target.ordinal);
               !refusal.empty()) {
      probe.set_reason(refusal);
    } else {
      const gpu::BackendAvailability a =
          gpu_->ProbeMoeBackend(name_, target.ordinal);
      probe.set_available(a.available);
      probe.set_reason(a.reason);
    }
    AddTiles(descriptor_, &probe);
    return probe;
  }

  absl::StatusOr<BackendRun> Run(const TrialInputs& in) override {
    if (in.trial.workload().region() == v1::DECODE_STEP) return RunStep(in);
    if (in.gang != nullptr) {
      return absl::FailedPreconditionError(
          "MEASURED communication runs whole decode steps (workload.region "
          "DECODE_STEP); a MoE layer alone makes no collectives to measure");
    }
    const gpu::MoeRunOptions options = MakeOptions(in, name_);
    gpu::MoeRunResult result = gpu_->RunMoeLayer(MakeProblem(in), options);
    RETURN_IF_ERROR(GpuRunStatus(result.status, result.message));
    BackendRun run;
    run.output = std::move(result.output);
    run.reference = std::move(result.reference_output);
    run.samples_us = std::move(result.samples_us);
    run.bytes = result.bytes;
    run.layers = options.chain_layers;
    run.check_s = result.check_s;
    run.timed_s = result.timed_s;
    return run;
  }

 private:
  // The whole decode step of the trial's rank: its logits slice, checked
  // against the reference (BackendRun::reference when the GPU computed it).
  absl::StatusOr<BackendRun> RunStep(const TrialInputs& in) {
    gpu::StepRunOptions options = MakeStepOptions(in, name_);
    std::unique_ptr<gpu::GangComm> comm;
    if (in.gang != nullptr) {
      ASSIGN_OR_RETURN(comm, JoinGang(gpu_, GangJoinOf(in), in.rendezvous));
      options.comm = comm.get();
    }
    gpu::StepRunResult result =
        gpu_->RunDecodeStep(gpu::MakeStepProblem(in.step), options);
    RETURN_IF_ERROR(GpuRunStatus(result.status, result.message));
    BackendRun run;
    const size_t block =
        static_cast<size_t>(in.step.batch) * in.step.config.hidden;
    if (!result.moe_reference.empty()) {
      // Real dims: each MoE layer checked on its own input in the step.
      run.output = std::move(result.moe_output);
      run.reference = std::move(result.moe_reference);
      run.layers = static_cast<int>(run.output.size() / block);
    } else {
      run.output = std::move(result.logits);  // against the CPU reference
      run.chosen_experts = std::move(result.chosen_experts);
      run.kept_tokens = std::move(result.kept_tokens);
      run.kept_counts = std::move(result.kept_counts);
    }
    run.samples_us = std::move(result.samples_us);
    run.check_s = result.check_s;
    run.timed_s = result.timed_s;
    run.bytes = static_cast<double>(
        ref::DecodeStepByteBreakdown(in.step, result.distinct_experts).Total());
    if (comm != nullptr) run.comm_measured_us = result.comm_us;
    return run;
  }

  // Why the device at `ordinal` lacks the architecture the backend needs
  // ("" when it has it, or when it is absent: the GPU library says why).
  std::string DeviceRefusal(int ordinal) {
    const gpu::DeviceInfo device = gpu_->QueryDevice(ordinal);
    if (!device.present) return "";
    return descriptor_.DeviceRefusal(device.sm_major * 10 + device.sm_minor);
  }

  const backends::BackendDescriptor& descriptor_;
  const std::string name_;
  GpuApi* gpu_;
};

}  // namespace

absl::Status GpuRunStatus(gpu::RunStatus status, const std::string& message) {
  switch (status) {
    case gpu::RunStatus::kOk:
      return absl::OkStatus();
    case gpu::RunStatus::kCannotImplement:
      return absl::FailedPreconditionError(
          absl::StrCat("kernel cannot do this shape: ", message));
    case gpu::RunStatus::kBadProblem:
      return absl::InvalidArgumentError(message);
    case gpu::RunStatus::kUnavailable:
      return absl::UnavailableError(message);
    case gpu::RunStatus::kCudaError:
      return absl::InternalError(absl::StrCat("CUDA error: ", message));
  }
  return absl::InternalError("unknown GPU run status");
}

std::unique_ptr<Backend> MakeGpuBackend(
    const backends::BackendDescriptor& descriptor, GpuApi* gpu) {
  return std::make_unique<GpuMoeBackend>(descriptor, gpu);
}

}  // namespace moetune::worker
