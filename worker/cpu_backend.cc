#include "worker/cpu_backend.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/backends/tile_shape.h"
#include "kernels/reference/decode_step.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/router.h"
#include "kernels/reference/step_spec.h"

namespace moetune::worker {
namespace {

using RegionFn = std::function<absl::Status(std::vector<float>* out)>;

// Warm-up, then one sample per iteration from the monotonic clock.
absl::StatusOr<std::vector<double>> TimeOnCpu(const Clock& clock,
                                              const v1::Measurement& m,
                                              const RegionFn& region) {
  std::vector<float> scratch;
  for (int i = 0; i < m.warmup_iterations(); ++i) {
    RETURN_IF_ERROR(region(&scratch));
  }
  std::vector<double> samples;
  samples.reserve(m.iterations());
  for (int i = 0; i < m.iterations(); ++i) {
    const int64_t start = clock.MonotonicNs();
    RETURN_IF_ERROR(region(&scratch));
    samples.push_back(static_cast<double>(clock.MonotonicNs() - start) / 1e3);
  }
  return samples;
}

// Runs `region` once for the output, then times it.
absl::StatusOr<BackendRun> RunRegion(const Clock& clock, const TrialInputs& in,
                                     const RegionFn& region, double bytes) {
  BackendRun run;
  {
    const AddElapsedSeconds checking(clock, &run.check_s);
    RETURN_IF_ERROR(region(&run.output));
  }
  {
    const AddElapsedSeconds timing(clock, &run.timed_s);
    ASSIGN_OR_RETURN(run.samples_us,
                     TimeOnCpu(clock, in.trial.measurement(), region));
  }
  run.bytes = bytes;
  return run;
}

bool IsMoeRegion(const TrialInputs& in) {
  return in.trial.workload().region() == v1::MOE_LAYER;
}

// The MoE layer region for a given MoE implementation.
RegionFn MoeRegion(const TrialInputs& in, ref::MoeFn moe) {
  const int layer = FirstMoeLayer(in.step);
  auto x =
      std::make_shared<std::vector<float>>(ref::MoeLayerInput(in.step, layer));
  const int batch = in.step.batch;
  const int hidden = in.step.config.hidden;
  return
      [moe = std::move(moe), x, layer, batch, hidden](std::vector<float>* out) {
        out->assign(static_cast<size_t>(batch) * hidden, 0.0f);
        return moe(layer, x->data(), batch, out->data());
      };
}

// Under data-parallel attention a rank's MoE layers compute every rank's
// tokens. With no peers, as on the GPU (kernels/cuda/step/step_gpu.h
// StepProblem::peer_moe_input), the other ranks' rows are the synthetic MoE
// input, the rank's own rows its tokens, and it keeps its own rows of the
// output (its partial sums standing in for the reduce-scatter): the experts'
// load, and the time, are the whole batch's, as the floor counts them. A
// token's outputs do not depend on the other rows, so the check is unchanged.
ref::MoeFn WithSyntheticPeers(const ref::StepSpec& step, ref::MoeFn moe) {
  if (!step.shard.dp_attention || ref::World(step.shard) == 1) return moe;
  auto peers = std::make_shared<const std::vector<float>>(
      ref::MoeLayerInput(step, FirstMoeLayer(step)));
  const int batch = step.batch, hidden = step.config.hidden;
  const size_t first =
      static_cast<size_t>(ref::FirstOwnSequence(step.shard, batch)) * hidden;
  return [moe = std::move(moe), peers, batch, hidden, first](
             int layer, const float* x, int own, float* y) -> absl::Status {
    const size_t rows = static_cast<size_t>(own) * hidden;
    std::vector<float> whole = *peers;
    std::copy(x, x + rows, whole.begin() + first);
    std::vector<float> out(whole.size(), 0.0f);
    RETURN_IF_ERROR(moe(layer, whole.data(), batch, out.data()));
    std::copy(out.begin() + first, out.begin() + first + rows, y);
    return absl::OkStatus();
  };
}

RegionFn DecodeRegion(const TrialInputs& in, ref::MoeFn moe) {
  const ref::StepSpec step = in.step;
  return [step, moe = std::move(moe)](std::vector<float>* out) {
    ASSIGN_OR_RETURN(*out, ref::DecodeStep(step, moe));
    return absl::OkStatus();
  };
}

double RegionBytes(const TrialInputs& in) {
  if (!IsMoeRegion(in))
    return static_cast<double>(ref::DecodeStepBytes(in.step));
  const int layer = FirstMoeLayer(in.step);
  const std::vector<float> x = ref::MoeLayerInput(in.step, layer);
  return static_cast<double>(
      ref::MoeLayerBytes(in.step, layer, x.data(), in.step.batch));
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(const backends::BackendDescriptor& descriptor,
             backends::MoeFactory make_moe, const Clock* clock)
      : descriptor_(descriptor), make_moe_(make_moe), clock_(clock) {}
  const backends::BackendDescriptor& descriptor() const override {
    return descriptor_;
  }

  v1::BackendProbe Probe(const DeviceTarget& target) override {
    v1::BackendProbe probe;
    probe.set_name(std::string(descriptor_.name));
    probe.set_available(!target.is_gpu());
    if (target.is_gpu()) {
      probe.set_reason(
          absl::StrCat("CPU backend; this worker drives GPU ", target.ordinal,
                       " (CPU backends run on CPU workers: --device cpu)"));
    }
    AddTiles(descriptor_, &probe);
    return probe;
  }

  absl::StatusOr<BackendRun> Run(const TrialInputs& in) override {
    // A CPU worker has no NCCL and no peers: measured communication is not
    // something it can run, at any world size.
    if (in.trial.config().communication() == v1::MEASURED) {
      return absl::FailedPreconditionError(
          "MEASURED communication needs GPU workers with NCCL");
    }
    const v1::TileShape& tile = in.trial.config().tile();
    ASSIGN_OR_RETURN(ref::MoeFn moe,
                     make_moe_(in.step, backends::TileOf(tile)));
    RegionFn region = IsMoeRegion(in)
                          ? MoeRegion(in, moe)
                          : DecodeRegion(in, WithSyntheticPeers(in.step, moe));
    return RunRegion(*clock_, in, region, RegionBytes(in));
  }

 private:
  const backends::BackendDescriptor& descriptor_;
  const backends::MoeFactory make_moe_;
  const Clock* clock_;
};

}  // namespace

int FirstMoeLayer(const ref::StepSpec& step) {
  return step.config.num_dense_layers;
}

std::unique_ptr<Backend> MakeCpuBackend(
    const backends::BackendDescriptor& descriptor,
    backends::MoeFactory make_moe, const Clock* clock) {
  return std::make_unique<CpuBackend>(descriptor, make_moe, clock);
}

}  // namespace moetune::worker
