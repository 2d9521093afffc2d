// The communication model's parameters fitted to measured collectives
// (moetune-comm-bench --calibration): per implementation, collective and
// world size, latency from the small messages and bus bandwidth from the
// largest, as nccl-tests counts a collective's traffic; and each point
// measured inside a CUDA graph kept as a latency of its own. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/moetune.pb.h"

namespace moetune::comm {

// One measured collective: the slowest rank's median time.
struct CollectiveSample {
  std::string impl;              // "nccl" or "oneshot"
  std::string op = "allreduce";  // "allreduce", "allgather", "reducescatter"
  int world = 1;
  int64_t bytes = 0;  // the all-reduced buffer, or the gathered whole
  bool in_graph = false;
  double time_us = 0;
};

// Bytes a rank moves over its links for `op` of `bytes` over `world` ranks
// (nccl-tests' busbw): 2 (W - 1) / W of them for an all-reduce, (W - 1) / W
// for an all-gather or a reduce-scatter.
double BusBytes(const std::string& op, int world, double bytes);

// The stream fit (samples not in a graph) of `op` by `impl` at `world`:
// latency = the median time of the messages up to 32 KB, bus bandwidth
// from the largest message's time past that latency (0 at world 1), and
// the worst relative error of the fitted line over every point.
v1::CollectiveFit FitStream(const std::vector<CollectiveSample>& samples,
                            const std::string& impl, const std::string& op,
                            int world);

// Every fit the samples allow: a stream fit per (impl, op, world) in the
// order first seen, then a one-point in-graph fit per in-graph sample.
std::vector<v1::CollectiveFit> FitCalibration(
    const std::vector<CollectiveSample>& samples);

}  // namespace moetune::comm
