// Limits of one backend run that the sweep spec is validated against and the
// runtimes enforce: stated once here. Plain C++; thread-safe constants.
#pragma once

namespace moetune::backends {

// The most tokens a decode step may have (the GPU runtime's run buffers and
// grouped_mma's token tiles are sized for it).
inline constexpr int kMaxBatchTokens = 4096;

// The most MoE layers a GPU trial chains back to back (workload
// chain_layers): each chained layer keeps its own weights on the GPU.
inline constexpr int kMaxChainLayers = 16;

}  // namespace moetune::backends
