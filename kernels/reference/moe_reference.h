// The reference MoE layer of GLM-5 (docs/design.md §2), the oracle every MoE
// backend is checked against:
//   y = sum_k w_k * Expert_k(x) + Shared(x),
//   Expert(x) = down(SiLU(gate x) * (up x)),
// for the spec's shard (a rank's partial sum; summing every rank's output
// gives the unsharded y). Weights come straight from the hash
// (Nvfp4TensorDesc), never from packed bytes. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/reference/step_spec.h"

namespace moetune::ref {

// INVALID_ARGUMENT unless `layer` is an MoE layer of the model and
// batch >= 1. (`layer` may exceed spec.layers: timing one MoE layer alone
// needs no decode step.) Assumes ValidateStepSpec(spec) is OK.
absl::Status ValidateMoeCall(const StepSpec& spec, int layer, int batch);

// x: the post-attention-RMSNorm hidden [batch][hidden]; y: [batch][hidden],
// overwritten. Assumes ValidateStepSpec and ValidateMoeCall are OK.
void MoeLayerReference(const StepSpec& spec, int layer, const float* x,
                       int batch, float* y);

// MoeLayerReference routing each token by RouteTokenNear: another
// implementation's experts (proposed [batch][experts_per_token]) where they
// are a top-k of the reference's scores to within `tolerance`.
void MoeLayerReferenceNear(const StepSpec& spec, int layer, const float* x,
                           int batch, const int* proposed, float tolerance,
                           float* y);

// A synthetic, realistic MoE-layer input [spec.batch][hidden] for timing the
// layer alone: RMSNorm (with the layer's ffn-norm gamma) of uniform hash
// values, rounded to BF16 so a kernel reading BF16 activations sees exactly
// the reference's input.
std::vector<float> MoeLayerInput(const StepSpec& spec, int layer);

// Bytes of one routed (or the shared) expert's TP slice on this rank:
// codes + block scales of gate and up (2 * slice rows of K = hidden) and of
// down (hidden rows of K = slice).
int64_t ExpertSliceBytes(const model::ModelConfig& config, const Shard& shard);

// Bytes the rank's MoE layer must at least move: the BF16 router
// [experts, hidden]; each DISTINCT routed expert this shard owns, once (its
// TP slice); the shared expert's slice (ep_rank 0); the input and output
// activations as BF16 (2 * batch * hidden * 2). The roofline floor is this
// divided by the bandwidth.
int64_t MoeLayerBytes(const StepSpec& spec, int layer, const float* x,
                      int batch);

}  // namespace moetune::ref
