#include "worker/gpu_backend.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/router.h"
#include "worker/cpu_backend.h"

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
  options.block_n = config.tile().block_n();
  options.block_k = config.tile().block_k();
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
    if (in.trial.workload().region() != v1::MOE_LAYER) {
      return absl::InvalidArgumentError(
          "workload.region: GPU backends time MOE_LAYER only");
    }
    const gpu::MoeRunOptions options = MakeOptions(in, name_);
    gpu::MoeRunResult result = gpu_->RunMoeLayer(MakeProblem(in), options);
    RETURN_IF_ERROR(GpuRunStatus(result));
    BackendRun run;
    run.output = std::move(result.output);
    run.reference = std::move(result.reference_output);
    run.samples_us = std::move(result.samples_us);
    run.bytes = result.bytes;
    run.layers = options.chain_layers;
    return run;
  }

 private:
  const backends::BackendDescriptor& descriptor_;
  const std::string name_;
  GpuApi* gpu_;
};

}  // namespace

absl::Status GpuRunStatus(const gpu::MoeRunResult& result) {
  switch (result.status) {
    case gpu::RunStatus::kOk:
      return absl::OkStatus();
    case gpu::RunStatus::kCannotImplement:
      return absl::FailedPreconditionError(
          absl::StrCat("kernel cannot do this shape: ", result.message));
    case gpu::RunStatus::kBadProblem:
      return absl::InvalidArgumentError(result.message);
    case gpu::RunStatus::kUnavailable:
      return absl::UnavailableError(result.message);
    case gpu::RunStatus::kCudaError:
      return absl::InternalError(absl::StrCat("CUDA error: ", result.message));
  }
  return absl::InternalError("unknown GPU run status");
}

std::unique_ptr<Backend> MakeGpuBackend(
    const backends::BackendDescriptor& descriptor, GpuApi* gpu) {
  return std::make_unique<GpuMoeBackend>(descriptor, gpu);
}

}  // namespace moetune::worker
