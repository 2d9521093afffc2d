// The no-CUDA stand-in for kernels/cuda/moe_gpu.h and step_gpu.h: linked
// instead of the CUDA library when the build has no CUDA toolkit, so that
// the GPU backends are still listed and probe as unavailable with the
// reason.
#include "kernels/cuda/moe_gpu.h"
#include "kernels/cuda/step_gpu.h"

namespace moetune::gpu {
namespace {
constexpr char kNotBuilt[] =
    "built without CUDA (no nvcc at configure time; MOETUNE_CUDA=OFF)";
}  // namespace

DeviceInfo QueryDevice(int ordinal) {
  DeviceInfo info{};
  info.present = false;
  info.ordinal = ordinal;
  info.error = kNotBuilt;
  return info;
}
int DeviceCount() { return 0; }
std::vector<int> PeerOrdinals(int) { return {}; }
std::vector<int> CompiledArchs() { return {}; }
double MeasureReadBandwidthGBps(int, std::string* error) {
  if (error != nullptr) *error = kNotBuilt;
  return 0;
}
std::string NcclVersion() { return ""; }
BackendAvailability ProbeMoeBackend(const std::string&, int) {
  return {false, kNotBuilt};
}
MoeRunResult RunMoeLayer(const MoeProblem&, const MoeRunOptions&) {
  MoeRunResult result;
  result.status = RunStatus::kUnavailable;
  result.message = kNotBuilt;
  return result;
}
StepRunResult RunDecodeStep(const StepProblem&, const StepRunOptions&) {
  StepRunResult result;
  result.status = RunStatus::kUnavailable;
  result.message = kNotBuilt;
  return result;
}

}  // namespace moetune::gpu
