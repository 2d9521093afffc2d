#include "worker/comm_model.h"

#include <algorithm>

namespace moetune::worker {

namespace {

// Ring all-reduce over `ranks` of `bytes`: 2 (r-1)/r of the buffer crosses
// each link, in 2 (r-1) steps.
double AllReduceUs(int ranks, double bytes, const CommModelParams& p) {
  if (ranks <= 1) return 0;
  const double moved = 2.0 * (ranks - 1) / ranks * bytes;
  return moved / (p.link_gbps * 1e3) + 2.0 * (ranks - 1) * p.latency_us;
}

}  // namespace

double ModelCommFloorUs(const CommShape& s, const CommModelParams& p) {
  const double activation_bytes = 2.0 * s.batch * s.hidden;  // BF16
  const double bytes_per_us = p.link_gbps * 1e3;             // GB/s -> B/us
  double moe_layer = AllReduceUs(s.tp, activation_bytes, p);
  if (s.ep > 1) {
    // Each token goes to top_k expert slots; (ep-1)/ep of them are remote.
    const double remote = activation_bytes * s.top_k * (s.ep - 1) / s.ep;
    moe_layer += 2.0 * (remote / bytes_per_us + p.latency_us);
  }
  if (!s.whole_step) return moe_layer * s.layers;
  const int world = s.tp * s.ep;
  if (world <= 1) return 0;
  const double world_reduce = AllReduceUs(world, activation_bytes, p);
  const int dense = std::min(s.dense_layers, s.layers);
  return s.layers * world_reduce + dense * world_reduce +
         (s.layers - dense) * moe_layer + p.latency_us;
}

}  // namespace moetune::worker
