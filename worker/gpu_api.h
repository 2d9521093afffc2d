// GpuApi: the worker's only door to the GPU. RealGpuApi forwards to
// kernels/cuda/moe/moe_gpu.h, step_gpu.h and comm_gpu.h (the CUDA library, or
// its no-CUDA stand-in that answers "built without CUDA"); tests substitute a
// fake. Implementations must be thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/comm/comm_gpu.h"
#include "kernels/cuda/moe/moe_gpu.h"
#include "kernels/cuda/step/step_gpu.h"

namespace moetune::worker {

class GpuApi {
 public:
  virtual ~GpuApi() = default;
  virtual bool BuiltWithCuda() = 0;
  virtual int DeviceCount() = 0;
  virtual gpu::DeviceInfo QueryDevice(int ordinal) = 0;
  // The ordinals this device reaches peer to peer (a gang's NVLink / PCIe).
  virtual std::vector<int> PeerOrdinals(int ordinal) = 0;
  virtual double MeasureReadBandwidthGBps(int ordinal, std::string* error) = 0;
  virtual std::string NcclVersion() = 0;
  virtual gpu::BackendAvailability ProbeMoeBackend(const std::string& name,
                                                   int ordinal) = 0;
  virtual gpu::MoeRunResult RunMoeLayer(const gpu::MoeProblem& problem,
                                        const gpu::MoeRunOptions& options) = 0;
  virtual gpu::StepRunResult RunDecodeStep(
      const gpu::StepProblem& problem, const gpu::StepRunOptions& options) = 0;
  // A gang's communication (kernels/cuda/comm/comm_gpu.h).
  virtual gpu::RunStatus NewNcclId(std::string* id, std::string* error) = 0;
  virtual std::unique_ptr<gpu::GangComm> CreateGangComm(
      const gpu::GangCommSetup& setup, const gpu::AllGatherBytes& exchange,
      std::string* error) = 0;
};

class RealGpuApi final : public GpuApi {
 public:
  bool BuiltWithCuda() override;
  int DeviceCount() override { return gpu::DeviceCount(); }
  gpu::DeviceInfo QueryDevice(int ordinal) override {
    return gpu::QueryDevice(ordinal);
  }
  std::vector<int> PeerOrdinals(int ordinal) override {
    return gpu::PeerOrdinals(ordinal);
  }
  double MeasureReadBandwidthGBps(int ordinal, std::string* error) override {
    return gpu::MeasureReadBandwidthGBps(ordinal, error);
  }
  std::string NcclVersion() override { return gpu::NcclVersion(); }
  gpu::BackendAvailability ProbeMoeBackend(const std::string& name,
                                           int ordinal) override {
    return gpu::ProbeMoeBackend(name, ordinal);
  }
  gpu::MoeRunResult RunMoeLayer(const gpu::MoeProblem& problem,
                                const gpu::MoeRunOptions& options) override {
    return gpu::RunMoeLayer(problem, options);
  }
  gpu::StepRunResult RunDecodeStep(
      const gpu::StepProblem& problem,
      const gpu::StepRunOptions& options) override {
    return gpu::RunDecodeStep(problem, options);
  }
  gpu::RunStatus NewNcclId(std::string* id, std::string* error) override {
    return gpu::NewNcclId(id, error);
  }
  std::unique_ptr<gpu::GangComm> CreateGangComm(
      const gpu::GangCommSetup& setup, const gpu::AllGatherBytes& exchange,
      std::string* error) override {
    return gpu::CreateGangComm(setup, exchange, error);
  }
};

}  // namespace moetune::worker
