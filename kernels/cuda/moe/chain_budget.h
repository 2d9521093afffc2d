// Whether a chain of MoE layers (MoeRunOptions::chain_layers) fits in the
// device's free memory: each chained layer keeps its own weights on the GPU
// (~5.4 GB at glm5 dims), so a long chain on a small device is refused
// before anything is allocated, with the sizes, rather than failing in
// cudaMalloc. Plain C++ (no CUDA), so that it is tested on the CPU.
#pragma once

#include <cstdio>
#include <string>

namespace moetune::gpu {

// Device memory kept free for the run's buffers and the runtime (bytes).
inline constexpr double kChainReserveBytes = 2.0e9;

// "" when `new_layers` more layers of `layer_bytes` of weights fit in
// `free_bytes` (less the reserve); otherwise the error, naming the option.
inline std::string ChainDoesNotFit(int chain_layers, int new_layers,
                                   double layer_bytes, double free_bytes) {
  const double need = new_layers * layer_bytes;
  if (new_layers <= 0 || need <= free_bytes - kChainReserveBytes) return "";
  char text[256];
  std::snprintf(text, sizeof(text),
                "options.chain_layers: %d layers keep their weights on the "
                "GPU; %d more need %.1f GB and %.1f GB are free (less %.0f GB "
                "kept for the run)",
                chain_layers, new_layers, need / 1e9, free_bytes / 1e9,
                kChainReserveBytes / 1e9);
  return text;
}

}  // namespace moetune::gpu
