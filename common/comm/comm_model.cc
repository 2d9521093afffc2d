#include "common/comm/comm_model.h"

#include <algorithm>

#include "common/legacy_spelling.h"

namespace moetune::comm {

namespace {

// The stream fit of `op` by `impl` at `world`, or nullptr.
const v1::CollectiveFit* FitOf(const CommModelParams& params,
                               v1::AllReduceImpl impl, int world,
                               const std::string& op) {
  const char* name = AllReduceImplText(impl);
  for (const v1::CollectiveFit& fit : params.fits) {
    const std::string fit_op = fit.op().empty() ? "allreduce" : fit.op();
    if (fit.allreduce() == name && fit.world_size() == world && fit_op == op &&
        !fit.in_graph()) {
      return &fit;
    }
  }
  return nullptr;
}

}  // namespace

CollectiveCost CostOf(const CommModelParams& params, v1::AllReduceImpl impl,
                      int world, const std::string& op) {
  const v1::CollectiveFit* fit = FitOf(params, impl, world, op);
  if (fit == nullptr) fit = FitOf(params, impl, world, "allreduce");
  if (fit != nullptr) return {fit->latency_us(), fit->bus_gbps()};
  return impl == v1::ALL_REDUCE_ONESHOT ? params.oneshot : params.nccl;
}

double ModelAllReduceUs(const CommModelParams& params, v1::AllReduceImpl impl,
                        int ranks, double bytes) {
  if (ranks <= 1) return 0;
  const CollectiveCost cost = CostOf(params, impl, ranks);
  const double moved = 2.0 * (ranks - 1) / ranks * bytes;
  const double wire_us = cost.bus_gbps > 0 ? moved / (cost.bus_gbps * 1e3) : 0;
  return cost.latency_us + wire_us;
}

// Where a calibration measured the all-gather and reduce-scatter
// themselves (moetune-comm-bench --ops=...,allgather,reducescatter) their
// own fits price them. Without: NCCL runs them on the rings and NVLink
// channels its all-reduce uses, and nccl-tests defines busbw so that the
// three reach the same bus bandwidth on one link (the all-gather and the
// reduce-scatter move (W - 1) / W of the whole a rank, the all-reduce twice
// that); the one-shot kernel runs all three with the same synchronisation
// and peer reads. So they take their implementation's all-reduce latency
// and bus bandwidth. That latency is a whole all-reduce's, which overstates
// NCCL's single ring pass where latency dominates (small batches).
double ModelGatherOrScatterUs(const CommModelParams& params,
                              v1::AllReduceImpl impl, const std::string& op,
                              int ranks, double bytes) {
  if (ranks <= 1) return 0;
  const CollectiveCost cost = CostOf(params, impl, ranks, op);
  const double moved = static_cast<double>(ranks - 1) / ranks * bytes;
  const double wire_us = cost.bus_gbps > 0 ? moved / (cost.bus_gbps * 1e3) : 0;
  return cost.latency_us + wire_us;
}

namespace {

double MoeLayerUs(const CommShape& s, const CommModelParams& p) {
  const double activation_bytes = 2.0 * s.batch * s.hidden;  // BF16
  double us = ModelAllReduceUs(p, s.all_reduce, s.tp, activation_bytes);
  if (s.ep > 1) {
    // Each token goes to top_k expert slots; (ep-1)/ep of them are remote.
    const CollectiveCost cost = CostOf(p, v1::ALL_REDUCE_NCCL, s.ep);
    const double remote = activation_bytes * s.top_k * (s.ep - 1) / s.ep;
    const double wire_us =
        cost.bus_gbps > 0 ? remote / (cost.bus_gbps * 1e3) : 0;
    us += 2.0 * (cost.latency_us + wire_us);
  }
  return us;
}

// Under dp attention: per MoE layer, the all-gather of its input (the BF16
// the experts read) and the reduce-scatter of its partial outputs (FP32),
// every rank's tokens; no sums of attention or the dense MLP and no token
// gather (each rank chooses its own sequences' tokens).
double DpStepUs(const CommShape& s, const CommModelParams& p) {
  const int moe_layers = std::max(0, s.layers - s.dense_layers);
  const int world = s.tp * s.ep;
  const double tokens = static_cast<double>(s.batch) * s.hidden;
  return moe_layers * (ModelGatherOrScatterUs(p, s.all_reduce, "allgather",
                                              world, 2.0 * tokens) +
                       ModelGatherOrScatterUs(p, s.all_reduce, "reducescatter",
                                              world, 4.0 * tokens));
}

}  // namespace

double ModelCommFloorUs(const CommShape& s, const CommModelParams& p) {
  if (!s.whole_step) return MoeLayerUs(s, p) * s.layers;
  const int world = s.tp * s.ep;
  if (world <= 1) return 0;
  if (s.dp_attention) return DpStepUs(s, p);
  const double block_bytes = 4.0 * s.batch * s.hidden;  // FP32 partials
  const double gather_bytes = 8.0 * s.batch * world;
  return 2 * s.layers * ModelAllReduceUs(p, s.all_reduce, world, block_bytes) +
         ModelAllReduceUs(p, s.all_reduce, world, gather_bytes);
}

}  // namespace moetune::comm
