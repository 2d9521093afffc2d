// The GPU MoE layer's public face: plain C++ (no CUDA, abseil or gRPC
// headers), so the worker, compiled by g++, calls the kernels through it. When
// the build has no CUDA, kernels/cuda/no_cuda.cc defines the same functions
// and answers "built without CUDA". Every function is safe to call without a
// GPU: errors come back as values, never as aborts. Functions are
// thread-safe unless noted; RunMoeLayer uses the device exclusively while it
// runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backends/descriptor.h"
#include "kernels/cuda/base/device.h"

namespace moetune::gpu {

struct BackendAvailability {
  bool available = false;
  std::string reason;  // why not
};
BackendAvailability ProbeMoeBackend(const std::string& name, int ordinal);

struct MoeDims {
  int hidden = 0, moe_inter = 0, num_experts = 0, top_k = 0, num_shared = 0;
  float routed_scaling = 1.0f;
};
struct MoeShard {
  int tp = 1, ep = 1, rank = 0;
};
struct MoeProblem {
  MoeDims dims;
  uint64_t seed = 0;
  int layer = 0;
  int batch = 1;
  std::vector<float> router_bias;  // [num_experts]
  std::vector<float> input;        // [batch][hidden]
  MoeShard shard;
};
struct MoeRunOptions {
  std::string backend;
  backends::Tile tile;  // Tile{}: the backend's own for the layer
  bool cuda_graph = false;
  int warmup = 3;
  int iterations = 20;
  int device = 0;
  bool compute_reference = false;  // also run the trusted GPU path
  // Time layers problem.layer .. + chain_layers - 1 (each its own weights,
  // all on the same input and router bias) back to back, as a decode step
  // runs them (in one graph when cuda_graph), and report per layer. 1 to
  // backends::kMaxChainLayers (kernels/backends/limits.h);
  // output and reference hold every layer's, distinct_experts the first's.
  int chain_layers = 1;
};
struct MoeRunResult {
  RunStatus status = RunStatus::kOk;
  std::string message;
  std::vector<double> samples_us;  // raw timed iterations (us a layer)
  // [chain_layers][batch][hidden]: each layer's output from an untimed run,
  // and the trusted path's for the same layer (its weights, the same input
  // and bias) when compute_reference.
  std::vector<float> output;
  std::vector<float> reference_output;
  double bytes = 0;  // the rank's minimum bytes (a layer: the chain's mean)
  int distinct_experts = 0;
  // Seconds in the checked runs (with their trusted path) and in warm-ups
  // and timed iterations; the rest of the call is setup.
  double check_s = 0, timed_s = 0;
};

MoeRunResult RunMoeLayer(const MoeProblem& problem,
                         const MoeRunOptions& options);

}  // namespace moetune::gpu
