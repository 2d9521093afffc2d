// The no-CUDA stand-in for the GPU library's public headers (base/device.h,
// moe/moe_gpu.h, step/step_gpu.h, comm/comm_gpu.h): built as moetune_cuda
// when the build has no CUDA toolkit, so that the GPU backends are still
// listed and probe as unavailable with the reason.
#include "kernels/cuda/base/device.h"
#include "kernels/cuda/comm/comm_gpu.h"
#include "kernels/cuda/moe/moe_gpu.h"
#include "kernels/cuda/step/step_gpu.h"

namespace moetune::gpu {
namespace {
constexpr char kNotBuilt[] =
    "built without CUDA (no nvcc at configure time; MOETUNE_CUDA=OFF)";
}  // namespace

bool BuiltWithCuda() { return false; }

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

RunStatus NewNcclId(std::string*, std::string* error) {
  *error = kNotBuilt;
  return RunStatus::kUnavailable;
}
std::unique_ptr<GangComm> CreateGangComm(const GangCommSetup&,
                                         const AllGatherBytes&,
                                         std::string* error) {
  *error = kNotBuilt;
  return nullptr;
}
std::vector<std::unique_ptr<GangComm>> CreateLocalGang(const std::vector<int>&,
                                                       AllReduceImpl, int64_t,
                                                       std::string* error) {
  *error = kNotBuilt;
  return {};
}
RunStatus TimeCollective(GangComm*, CollectiveOp, int64_t, int, int, bool,
                         const std::function<void()>&, AllReduceTiming*,
                         std::string* error) {
  *error = kNotBuilt;
  return RunStatus::kUnavailable;
}
RunStatus TimeAllReduce(GangComm*, int64_t, int, int, bool,
                        const std::function<void()>&, AllReduceTiming*,
                        std::string* error) {
  *error = kNotBuilt;
  return RunStatus::kUnavailable;
}

}  // namespace moetune::gpu
