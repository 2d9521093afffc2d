#include "worker/system_info.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

namespace moetune::worker {

std::string RealSystemInfo::HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

std::string RealSystemInfo::BootId() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(file, id);
  return id;
}

std::string RealSystemInfo::CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) {
        return line.substr(colon + 2);
      }
    }
  }
  return "unknown CPU";
}

int RealSystemInfo::HardwareThreads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int64_t RealSystemInfo::MemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size
                                    : 0;
}

// One thread summing a 256 MiB buffer (larger than any cache), best of 3
// passes: the bandwidth a single-threaded CPU backend can hope for, which is
// what its roofline floor should use.
// The buffer is mapped with transparent huge pages where the kernel allows
// them and written once: a zero-filled std::vector writes it twice and takes
// a page fault every 4 KB, measured at 90 % of a CPU worker's 0.9 s probe on
// a VM, which every CPU worker and `moetune sweep` on a CPU would pay.
double RealSystemInfo::MeasureCpuReadGBps() {
  constexpr size_t kBytes = size_t{256} << 20;  // past any L3 of these hosts
  constexpr size_t kWords = kBytes / sizeof(uint64_t);
  void* mapped = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return 0;  // no figure: the floor is left out
  madvise(mapped, kBytes, MADV_HUGEPAGE);
  uint64_t* buffer = static_cast<uint64_t*>(mapped);
  for (size_t i = 0; i < kWords; ++i) buffer[i] = i * 2654435761u;
  double best_seconds = 1e30;
  volatile uint64_t sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    uint64_t sum0 = 0, sum1 = 0, sum2 = 0, sum3 = 0;
    for (size_t i = 0; i < kWords; i += 4) {
      sum0 += buffer[i];
      sum1 += buffer[i + 1];
      sum2 += buffer[i + 2];
      sum3 += buffer[i + 3];
    }
    sink = sink + sum0 + sum1 + sum2 + sum3;
    const std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start;
    best_seconds = std::min(best_seconds, elapsed.count());
  }
  munmap(mapped, kBytes);
  return static_cast<double>(kBytes) / best_seconds / 1e9;
}

}  // namespace moetune::worker
