#include "worker/probe.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backends/registry.h"
#include "tests/worker/fakes.h"

namespace moetune::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const v1::BackendProbe& Find(const v1::Probe& probe, const std::string& name) {
  for (const v1::BackendProbe& b : probe.backends()) {
    if (b.name() == name) return b;
  }
  static const v1::BackendProbe* missing = new v1::BackendProbe();
  return *missing;
}

class ProbeTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  FakeSystemInfo system_;
  FakeGpuApi gpu_;
  BackendRegistry registry_ = MakeDefaultRegistry(&clock_, &gpu_);
  ProbeEnv env_{&system_, &gpu_, &clock_};
};

TEST_F(ProbeTest, EveryRegisteredBackendIsProbed) {
  const v1::Probe probe = ProbeWorker(DeviceTarget{-1}, registry_, env_);
  EXPECT_EQ(probe.backends_size(),
            static_cast<int>(backends::AllBackends().size()));
  EXPECT_EQ(probe.probed_at_unix_ms(), clock_.NowUnixMs());
}

TEST_F(ProbeTest, CpuWorkerHasCpuBackendsAndSaysWhyNotGpuOnes) {
  const v1::Probe probe = ProbeWorker(DeviceTarget{-1}, registry_, env_);
  EXPECT_EQ(probe.fingerprint().device_name(), "Fake CPU 9000");
  EXPECT_EQ(probe.fingerprint().sm_arch(), "cpu");
  EXPECT_DOUBLE_EQ(probe.device().measured_read_gbps(), 10.0);
  EXPECT_TRUE(Find(probe, "cpu_reference").available());
  EXPECT_TRUE(Find(probe, "cpu_blocked").available());
  EXPECT_EQ(Find(probe, "cpu_blocked").tiles_size(), 4);
  EXPECT_FALSE(Find(probe, "fused_gemv").available());
  EXPECT_THAT(Find(probe, "fused_gemv").reason(), HasSubstr("runs on the CPU"));
}

TEST_F(ProbeTest, GpuWorkerAsksTheGpuLibraryPerBackend) {
  const v1::Probe probe = ProbeWorker(DeviceTarget{0}, registry_, env_);
  EXPECT_EQ(probe.fingerprint().device_name(), "Fake H200");
  EXPECT_EQ(probe.fingerprint().sm_arch(), "sm_90");
  EXPECT_EQ(probe.fingerprint().cuda_version(), "13.0");
  EXPECT_EQ(probe.fingerprint().nccl_version(), "2.28.3");
  EXPECT_DOUBLE_EQ(probe.device().measured_read_gbps(), 4500);
  EXPECT_TRUE(Find(probe, "fused_gemv").available());
  // Hopper has what grouped_mma needs; the library (the fake) says no.
  EXPECT_FALSE(Find(probe, "grouped_mma").available());
  EXPECT_EQ(Find(probe, "grouped_mma").reason(),
            "grouped_mma is not available on Fake H200");
  EXPECT_FALSE(Find(probe, "cpu_blocked").available());
  EXPECT_THAT(Find(probe, "cpu_blocked").reason(), HasSubstr("CPU workers"));
}

// The device's architecture is checked against each backend's GpuNeeds
// before the GPU library is asked: sm_90a code (wgmma) runs on Hopper only,
// sm_90+ code on Hopper and every later GPU.
TEST_F(ProbeTest, GpuBackendsNeedingAnotherArchitectureSayWhich) {
  gpu_.available_backends = {"fused_gemv", "grouped_wgmma", "fused_gemv_fp8",
                             "native_fp4"};
  const v1::Probe hopper = ProbeWorker(DeviceTarget{0}, registry_, env_);
  EXPECT_TRUE(Find(hopper, "grouped_wgmma").available());
  EXPECT_TRUE(Find(hopper, "fused_gemv_fp8").available());
  EXPECT_EQ(Find(hopper, "native_fp4").reason(),
            "native_fp4: needs sm_100+ (FP4 tensor cores, tcgen05), device "
            "is sm_90");

  gpu_.sm_major = 10;  // B200
  const v1::Probe b200 = ProbeWorker(DeviceTarget{0}, registry_, env_);
  EXPECT_EQ(b200.fingerprint().sm_arch(), "sm_100");
  EXPECT_TRUE(Find(b200, "fused_gemv").available());
  EXPECT_FALSE(Find(b200, "grouped_wgmma").available());
  EXPECT_EQ(Find(b200, "grouped_wgmma").reason(),
            "grouped_wgmma: needs sm_90a (wgmma), device is sm_100");
  EXPECT_EQ(Find(b200, "fused_gemv_fp8").reason(),
            "fused_gemv_fp8: needs sm_90a (FP8 wgmma), device is sm_100");
  EXPECT_TRUE(Find(b200, "native_fp4").available());  // the library decides

  gpu_.sm_major = 12;  // RTX Blackwell
  const v1::Probe rtx = ProbeWorker(DeviceTarget{0}, registry_, env_);
  EXPECT_TRUE(Find(rtx, "fused_gemv").available());
  EXPECT_EQ(Find(rtx, "grouped_wgmma").reason(),
            "grouped_wgmma: needs sm_90a (wgmma), device is sm_120");
  EXPECT_EQ(Find(rtx, "fused_gemv_wgmma").reason(),
            "fused_gemv_wgmma: needs sm_90a (wgmma, for its wide part), "
            "device is sm_120");

  gpu_.sm_major = 8;  // A100
  const v1::Probe a100 = ProbeWorker(DeviceTarget{0}, registry_, env_);
  EXPECT_EQ(Find(a100, "fused_gemv").reason(),
            "fused_gemv: needs sm_90+ (Hopper), device is sm_80");
  EXPECT_EQ(Find(a100, "dequant_cublas").reason(),
            "dequant_cublas: needs sm_90+ (Hopper), device is sm_80");
  // The CPU backends are refused for the worker's placement, not its arch.
  EXPECT_THAT(Find(a100, "cpu_blocked").reason(), HasSubstr("CPU workers"));
}

TEST_F(ProbeTest, AnAbsentDeviceIsLeftToTheGpuLibrary) {
  gpu_.present = false;
  const v1::Probe probe = ProbeWorker(DeviceTarget{0}, registry_, env_);
  EXPECT_EQ(Find(probe, "grouped_wgmma").reason(),
            "grouped_wgmma is not available on Fake H200");
}

TEST_F(ProbeTest, MissingGpuIsNamedInTheFingerprint) {
  gpu_.present = false;
  const v1::Probe probe = ProbeWorker(DeviceTarget{3}, registry_, env_);
  EXPECT_THAT(probe.fingerprint().device_name(), HasSubstr("GPU 3 absent"));
}

TEST_F(ProbeTest, HostIdIsTheHostNameAndTheBootId) {
  const v1::Probe cpu = ProbeWorker(DeviceTarget{-1}, registry_, env_);
  EXPECT_EQ(cpu.device().host_id(),
            "testhost/6a1c9c2e-4d7b-4b8e-9f11-2d3c4b5a6978");
  EXPECT_TRUE(cpu.device().peer_ordinals().empty());
  system_.boot_id = "";  // unreadable: the name alone
  EXPECT_EQ(ProbeWorker(DeviceTarget{0}, registry_, env_).device().host_id(),
            "testhost");
}

TEST_F(ProbeTest, GpuWorkerListsItsPeers) {
  gpu_.device_count = 4;
  const v1::Probe probe = ProbeWorker(DeviceTarget{1}, registry_, env_);
  EXPECT_THAT(probe.device().peer_ordinals(), ElementsAre(0, 2, 3));
  EXPECT_EQ(probe.device().host_id(),
            "testhost/6a1c9c2e-4d7b-4b8e-9f11-2d3c4b5a6978");
}

TEST_F(ProbeTest, FingerprintHashIsStableAndSensitive) {
  const v1::Probe a = ProbeWorker(DeviceTarget{0}, registry_, env_);
  const v1::Probe b = ProbeWorker(DeviceTarget{0}, registry_, env_);
  EXPECT_EQ(a.fingerprint().hash(), b.fingerprint().hash());
  EXPECT_EQ(a.fingerprint().hash().size(), 16u);
  v1::Fingerprint changed = a.fingerprint();
  changed.set_sm_clock_mhz(1000);
  EXPECT_NE(FingerprintHash(changed), a.fingerprint().hash());
  EXPECT_EQ(CudaVersionString(12080), "12.8");
}

}  // namespace
}  // namespace moetune::worker
