#include "worker/probe.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/build_info.h"
#include "common/stable_hash.h"
#include "kernels/backends/cpu/cpu_registry.h"
#include "kernels/backends/registry.h"
#include "worker/cpu_backend.h"
#include "worker/gpu_backend.h"

namespace moetune::worker {
namespace {

// hostname/boot-id: workers with the same one share a machine (a gang's
// ranks must); the boot id tells apart machines that share a name.
std::string HostId(SystemInfo& system) {
  const std::string boot_id = system.BootId();
  return boot_id.empty() ? system.HostName()
                         : absl::StrCat(system.HostName(), "/", boot_id);
}

void FillCpuDevice(SystemInfo& system, v1::Probe* probe) {
  v1::Fingerprint* fp = probe->mutable_fingerprint();
  fp->set_device_name(system.CpuModel());
  fp->set_sm_arch("cpu");
  fp->set_sm_count(system.HardwareThreads());
  v1::DeviceProbe* device = probe->mutable_device();
  device->set_is_gpu(false);
  device->set_ordinal(-1);
  device->set_memory_bytes(system.MemoryBytes());
  device->set_measured_read_gbps(system.MeasureCpuReadGBps());
}

void FillGpuDevice(int ordinal, GpuApi& gpu, v1::Probe* probe) {
  const gpu::DeviceInfo info = gpu.QueryDevice(ordinal);
  v1::Fingerprint* fp = probe->mutable_fingerprint();
  v1::DeviceProbe* device = probe->mutable_device();
  device->set_is_gpu(true);
  device->set_ordinal(ordinal);
  if (!info.present) {
    fp->set_device_name(absl::StrCat("GPU ", ordinal, " absent: ", info.error));
    return;
  }
  fp->set_device_name(info.name);
  fp->set_sm_arch(absl::StrCat("sm_", info.sm_major, info.sm_minor));
  fp->set_sm_count(info.sm_count);
  fp->set_sm_clock_mhz(info.sm_clock_mhz);
  fp->set_mem_clock_mhz(info.mem_clock_mhz);
  fp->set_driver_version(CudaVersionString(info.driver_version));
  fp->set_cuda_version(CudaVersionString(info.runtime_version));
  fp->set_nccl_version(gpu.NcclVersion());
  device->set_memory_bytes(info.memory_bytes);
  std::string error;
  device->set_measured_read_gbps(gpu.MeasureReadBandwidthGBps(ordinal, &error));
  for (int peer : gpu.PeerOrdinals(ordinal)) device->add_peer_ordinals(peer);
}

}  // namespace

std::string CudaVersionString(int version) {
  if (version <= 0) return "";
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

std::string FingerprintHash(const v1::Fingerprint& fp) {
  const std::string identity = absl::StrCat(
      fp.device_name(), "|", fp.sm_arch(), "|", fp.sm_count(), "|",
      fp.sm_clock_mhz(), "|", fp.mem_clock_mhz(), "|", fp.driver_version(), "|",
      fp.cuda_version(), "|", fp.nccl_version(), "|", fp.build_hash());
  return absl::StrFormat("%016x", Fnv1a64(identity));
}

v1::Probe ProbeWorker(const DeviceTarget& target, BackendRegistry& registry,
                      const ProbeEnv& env) {
  v1::Probe probe;
  if (target.is_gpu()) {
    FillGpuDevice(target.ordinal, *env.gpu, &probe);
  } else {
    FillCpuDevice(*env.system, &probe);
  }
  probe.mutable_device()->set_host_id(HostId(*env.system));
  probe.mutable_fingerprint()->set_build_hash(BuildHash());
  probe.mutable_fingerprint()->set_hash(FingerprintHash(probe.fingerprint()));
  for (const auto& backend : registry.all()) {
    *probe.add_backends() = backend->Probe(target);
  }
  probe.set_probed_at_unix_ms(env.clock->NowUnixMs());
  return probe;
}

BackendRegistry MakeDefaultRegistry(const Clock* clock, GpuApi* gpu) {
  BackendRegistry registry;
  for (const backends::BackendDescriptor* d : backends::AllBackends()) {
    registry.Register(
        d->is_gpu() ? MakeGpuBackend(*d, gpu)
                    : MakeCpuBackend(*d, backends::FindCpuMoe(d->name), clock));
  }
  return registry;
}

}  // namespace moetune::worker
