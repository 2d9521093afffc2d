// The communication floor of a sharded trial when it runs on one GPU: the
// collectives a rank of a tp x ep world would perform, modelled from link
// bandwidth and latency (results say "modelled"). Pure functions.
#pragma once

namespace moetune::worker {

struct CommModelParams {
  // NVLink 4 (H100/H200 SXM): 450 GB/s per direction per GPU.
  double link_gbps = 450.0;
  // One NCCL small-message collective step on one node (us).
  double latency_us = 8.0;
};

struct CommShape {
  int batch = 1;   // tokens in the step
  int hidden = 0;  // elements per token activation
  int top_k = 8;   // routed experts per token
  int tp = 1;
  int ep = 1;
  int layers = 1;  // MoE layers (or decoder layers) the region covers
  // A whole decode step (kernels/reference/step_spec.h): every layer's
  // attention block is split over the world (tp * ep ranks) and ends in an
  // all-reduce over it, as do the first `dense_layers` layers' dense MLPs;
  // the MoE layers' collectives are as above; the ranks' best tokens are
  // gathered once at the end.
  bool whole_step = false;
  int dense_layers = 0;
};

// Modelled time (us) of the region's collectives: a ring all-reduce of the
// BF16 activations over tp per MoE layer, and EP dispatch + combine of each
// token's activation to the ranks owning its experts (plus, for a whole
// step, the world-wide all-reduces above). 0 when tp = ep = 1.
double ModelCommFloorUs(const CommShape& shape,
                        const CommModelParams& params = {});

}  // namespace moetune::worker
