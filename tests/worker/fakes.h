// Fakes for the worker's OS and GPU dependencies.
#pragma once

#include <string>
#include <vector>

#include "worker/gpu_api.h"
#include "worker/system_info.h"

namespace moetune::worker {

class FakeSystemInfo final : public SystemInfo {
 public:
  std::string HostName() override { return "testhost"; }
  std::string BootId() override { return boot_id; }
  std::string boot_id = "6a1c9c2e-4d7b-4b8e-9f11-2d3c4b5a6978";
  std::string CpuModel() override { return "Fake CPU 9000"; }
  int HardwareThreads() override { return 4; }
  int64_t MemoryBytes() override { return int64_t{16} << 30; }
  double MeasureCpuReadGBps() override { return 10.0; }
};

// A GPU that is there (or not), with per-backend answers and a scripted run.
class FakeGpuApi final : public GpuApi {
 public:
  bool present = true;
  int sm_major = 9, sm_minor = 0;  // the device's compute capability
  std::vector<std::string> available_backends = {"fused_gemv"};
  gpu::MoeRunResult next_run;
  gpu::MoeProblem last_problem;
  gpu::MoeRunOptions last_options;

  bool BuiltWithCuda() override { return true; }
  int DeviceCount() override { return present ? 1 : 0; }
  gpu::DeviceInfo QueryDevice(int ordinal) override {
    gpu::DeviceInfo info;
    info.present = present;
    info.ordinal = ordinal;
    if (!present) {
      info.error = "no CUDA-capable device is detected";
      return info;
    }
    info.name = "Fake H200";
    info.sm_major = sm_major;
    info.sm_minor = sm_minor;
    info.sm_count = 132;
    info.memory_bytes = int64_t{141} << 30;
    info.driver_version = 13000;
    info.runtime_version = 13000;
    return info;
  }
  std::vector<int> PeerOrdinals(int ordinal) override {
    std::vector<int> peers;
    for (int p = 0; p < device_count; ++p) {
      if (p != ordinal) peers.push_back(p);
    }
    return peers;
  }
  int device_count = 1;
  double MeasureReadBandwidthGBps(int, std::string*) override { return 4500; }
  std::string NcclVersion() override { return "2.28.3"; }
  gpu::BackendAvailability ProbeMoeBackend(const std::string& name,
                                           int) override {
    for (const std::string& b : available_backends) {
      if (b == name) return {true, ""};
    }
    return {false, name + " is not available on Fake H200"};
  }
  gpu::MoeRunResult RunMoeLayer(const gpu::MoeProblem& problem,
                                const gpu::MoeRunOptions& options) override {
    last_problem = problem;
    last_options = options;
    return next_run;
  }
  gpu::StepRunResult next_step;
  gpu::StepProblem last_step;
  gpu::StepRunOptions last_step_options;
  gpu::StepRunResult RunDecodeStep(
      const gpu::StepProblem& problem,
      const gpu::StepRunOptions& options) override {
    last_step = problem;
    last_step_options = options;
    return next_step;
  }
  // A gang's communicator that sums nothing: records its set-up and, for
  // the one-shot path, offers a handle through the rendezvous as the real
  // one does.
  class FakeGangComm final : public gpu::GangComm {
   public:
    explicit FakeGangComm(const gpu::GangCommSetup& s) : setup(s) {}
    int device() const override { return setup.device; }
    int rank() const override { return setup.rank; }
    int world() const override { return setup.world; }
    gpu::AllReduceImpl impl() const override { return setup.impl; }
    void* stream() const override { return nullptr; }
    gpu::RunStatus AllReduceSum(float*, int64_t, void*, std::string*) override {
      return gpu::RunStatus::kOk;
    }
    gpu::RunStatus AllGatherInPlace(void*, int64_t, void*,
                                    std::string*) override {
      return gpu::RunStatus::kOk;
    }
    gpu::RunStatus ReduceScatterSum(const float*, float*, int64_t, void*,
                                    std::string*) override {
      return gpu::RunStatus::kOk;
    }
    gpu::RunStatus Check(std::string*) override { return gpu::RunStatus::kOk; }
    gpu::GangCommSetup setup;
  };
  std::vector<gpu::GangCommSetup> gang_setups;
  std::vector<std::string> ipc_offers_seen;
  std::string comm_error;  // non-empty: CreateGangComm fails with it
  gpu::RunStatus NewNcclId(std::string* id, std::string*) override {
    *id = "fake-nccl-id";
    return gpu::RunStatus::kOk;
  }
  std::unique_ptr<gpu::GangComm> CreateGangComm(
      const gpu::GangCommSetup& setup, const gpu::AllGatherBytes& exchange,
      std::string* error) override {
    gang_setups.push_back(setup);
    if (!comm_error.empty()) {
      *error = comm_error;
      return nullptr;
    }
    if (setup.impl == gpu::AllReduceImpl::kOneShot) {
      std::vector<std::string> all;
      if (!exchange("oneshot-ipc", "handle-" + std::to_string(setup.rank), &all,
                    error)) {
        return nullptr;
      }
      ipc_offers_seen = all;
    }
    return std::make_unique<FakeGangComm>(setup);
  }
};

}  // namespace moetune::worker
