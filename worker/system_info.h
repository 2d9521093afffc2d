// SystemInfo: what the worker reads off the host (name, boot id, CPU model,
// threads, memory, streaming read bandwidth). Behind an interface so probes are
// tested with a fake. RealSystemInfo is stateless and thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace moetune::worker {

class SystemInfo {
 public:
  virtual ~SystemInfo() = default;
  virtual std::string HostName() = 0;
  // The kernel's boot id (/proc/sys/kernel/random/boot_id), "" when it
  // cannot be read: with the host name it tells one machine from another
  // (containers of one machine can share a name; a reboot changes it).
  virtual std::string BootId() = 0;
  virtual std::string CpuModel() = 0;
  virtual int HardwareThreads() = 0;
  virtual int64_t MemoryBytes() = 0;
  // Streaming read bandwidth of host memory (GB/s, 1e9 bytes/s).
  virtual double MeasureCpuReadGBps() = 0;
};

class RealSystemInfo final : public SystemInfo {
 public:
  std::string HostName() override;
  std::string BootId() override;
  std::string CpuModel() override;
  int HardwareThreads() override;
  int64_t MemoryBytes() override;
  double MeasureCpuReadGBps() override;
};

}  // namespace moetune::worker
