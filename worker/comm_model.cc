#include "worker/comm_model.h"

namespace moetune::worker {

double ModelCommFloorUs(const CommShape& s, const CommModelParams& p) {
  const double activation_bytes = 2.0 * s.batch * s.hidden;  // BF16
  const double bytes_per_us = p.link_gbps * 1e3;             // GB/s -> B/us
  double per_layer = 0;
  if (s.tp > 1) {
    // Ring all-reduce: 2 (t-1)/t of the buffer crosses each link.
    const double moved = 2.0 * (s.tp - 1) / s.tp * activation_bytes;
    per_layer += moved / bytes_per_us + 2.0 * (s.tp - 1) * p.latency_us;
  }
  if (s.ep > 1) {
    // Each token goes to top_k expert slots; (ep-1)/ep of them are remote.
    const double remote = activation_bytes * s.top_k * (s.ep - 1) / s.ep;
    per_layer += 2.0 * (remote / bytes_per_us + p.latency_us);
  }
  return per_layer * s.layers;
}

}  // namespace moetune::worker
