// The communication of a sharded trial: the collectives a rank of a tp x ep
// world performs, modelled from each collective's latency and bus bandwidth
// (results say "modelled"), or the model's figure kept beside a measurement
// (Roofline.comm_model_us) so its error can be reported. The parameters are
// assumptions until a calibration measured on real GPUs replaces them
// (moetune-comm-bench --calibration; worker --comm_calibration). Pure
// functions.
#pragma once

#include <string>
#include <vector>

#include "proto/moetune.pb.h"

namespace moetune::comm {

// One collective of `bytes` over W ranks costs latency_us + bytes * 2 (W -
// 1) / W / bus_gbps (an all-reduce's traffic per link, as nccl-tests'
// busbw counts it).
struct CollectiveCost {
  double latency_us = 0;
  double bus_gbps = 0;  // GB/s (1e9)
};

struct CommModelParams {
  // Assumed: NCCL's small all-reduce on one node of H200s is ~17 us at 8
  // ranks (an inference team's account) and 11-12 us at 2 inside a graph
  // (docs/performance.md); NVLink 4 carries ~360 GB/s of bus bandwidth.
  CollectiveCost nccl{17.0, 360.0};
  // Assumed: one kernel with two NVLink round trips, reading every peer.
  CollectiveCost oneshot{8.0, 150.0};
  // Measured fits (CommCalibration.fits): the fit of the implementation at
  // the trial's world size replaces the assumption.
  std::vector<v1::CollectiveFit> fits;
  std::string source = "assumed";  // or "calibrated on <device> ..."
};

struct CommShape {
  int batch = 1;   // tokens in the step
  int hidden = 0;  // elements per token activation
  int top_k = 8;   // routed experts per token
  int tp = 1;
  int ep = 1;
  int layers = 1;  // MoE layers (or decoder layers) the region covers
  // A whole decode step (kernels/cuda/step/step_gpu.h, StepRunOptions::comm):
  // the output of every layer's attention and of its MLP (dense or MoE: for EP
  // the combine of the experts' outputs, the batch being on every rank) is
  // summed over the world (FP32 [batch][hidden]), and the ranks' best
  // tokens are gathered once at the end (a sum of [world][batch][2] floats).
  bool whole_step = false;
  int dense_layers = 0;  // of `layers`, the first ones: no MoE
  v1::AllReduceImpl all_reduce = v1::ALL_REDUCE_NCCL;  // unset: NCCL
  // A whole step with data-parallel attention (ATTENTION_DP):
  // attention, the dense MLP and lm_head are whole on every rank, which
  // decodes its own batch / world sequences, so none of the sums above is
  // made. Each MoE layer (layers - dense_layers of them) instead gathers
  // every rank's input (an all-gather, BF16 [batch][hidden] in all) and
  // hands each rank its tokens' sums (a reduce-scatter of FP32 [batch]
  // [hidden]), by
  // `all_reduce`'s implementation (NCCL's or the one-shot kernel's).
  bool dp_attention = false;
};

// The cost parameters of collective `op` ("allreduce", "allgather" or
// "reducescatter") by implementation `impl` (unset: NCCL) at `world`
// ranks: the measured stream fit of that op if there is one (a fit's
// `allreduce` names the implementation as AllReduceImplText spells it);
// for an all-gather or reduce-scatter without one, the implementation's
// all-reduce fit (ModelGatherOrScatterUs says why); else the assumption.
CollectiveCost CostOf(const CommModelParams& params, v1::AllReduceImpl impl,
                      int world, const std::string& op = "allreduce");

// Modelled time (us) of one all-reduce of `bytes` over `ranks` (0 for one
// rank).
double ModelAllReduceUs(const CommModelParams& params, v1::AllReduceImpl impl,
                        int ranks, double bytes);

// Modelled time (us) of one all-gather or one reduce-scatter (`op`
// "allgather" or "reducescatter") over `ranks` of `bytes` in all (the
// gathered whole; each rank holds bytes / ranks) (0 for one rank) by
// implementation `impl`: latency + bytes (ranks - 1) / ranks / bus_gbps, as
// nccl-tests' busbw counts both, with CostOf's parameters.
double ModelGatherOrScatterUs(const CommModelParams& params,
                              v1::AllReduceImpl impl, const std::string& op,
                              int ranks, double bytes);

// Modelled time (us) of the region's collectives: for a whole step, as
// CommShape says; for a MoE layer, a BF16 all-reduce over tp and EP
// dispatch + combine of each token's activation to the ranks owning its
// experts. 0 when tp = ep = 1.
double ModelCommFloorUs(const CommShape& shape,
                        const CommModelParams& params = {});

}  // namespace moetune::comm
