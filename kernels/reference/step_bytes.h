// What rank r's decode step must at least read, by category: the numerator
// of its roofline floor (docs/design.md §4) and the breakdown the step's
// figures are reported against. Counts each byte the rank needs once: its
// shard of the weights (step_spec.h says which), the caches it attends to,
// and the activations it reads and writes at the step's ends. Pure
// functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/reference/step_spec.h"

namespace moetune::ref {

struct StepBytes {
  // q_a and kv_a (whole), q_b, kv_b and o_proj of this rank's heads, in the
  // map's attention precision (BF16 by default, or NVFP4), and the
  // attention block's BF16 norms (attention, q_a, kv_a, ffn).
  int64_t attention = 0;
  // wq_b, wk, weights_proj (the attention precision) and the key LayerNorm
  // (whole on every rank).
  int64_t indexer = 0;
  int64_t router = 0;  // BF16 routers of the MoE layers
  // NVFP4 slices of the distinct routed experts this rank owns that the
  // step's tokens chose, each once a layer.
  int64_t routed = 0;
  int64_t shared = 0;   // NVFP4 shared expert slices (ep_rank 0)
  int64_t dense = 0;    // dense MLP slices (NVFP4 by default, or BF16)
  int64_t lm_head = 0;  // vocabulary slice (BF16 or NVFP4), final norm
  // Latent entries of the kept past tokens: BF16 (kv_lora + rope values),
  // or FP8 (kv_lora bytes, an FP32 scale per 128, BF16 rope).
  int64_t kv_cache = 0;
  int64_t index_keys = 0;  // FP8 indexer keys of every past token
  // BF16 embedding rows of the tokens the rank decodes and its logits slice.
  int64_t activations = 0;

  int64_t Total() const;
  // (name, bytes) in the order above: "attention", "indexer", "router",
  // "routed", "shared", "dense", "lm_head", "kv_cache", "index_keys",
  // "activations".
  std::vector<std::pair<std::string, int64_t>> Categories() const;
};

// The breakdown when the i-th MoE layer the step runs routed its tokens to
// distinct_experts[i] distinct experts this rank owns (known by running the
// router: the GPU's, or the reference's RouteBatch). Missing entries count
// as 0. Assumes a valid spec and step shard.
StepBytes DecodeStepByteBreakdown(const StepSpec& spec,
                                  const std::vector<int>& distinct_experts);

// The distinct owned experts per MoE layer when each routes MoeLayerInput
// (the reference's stand-in: the step's own routing is known only by
// running it).
std::vector<int> StandInDistinctExperts(const StepSpec& spec);

}  // namespace moetune::ref
