// One full decode step of GLM-5 on the CPU (docs/design.md §2): token ids ->
// embedding -> `layers` decoder layers (RMSNorm, MLA attention with the DSA
// indexer, residual, RMSNorm, dense MLP or MoE, residual) -> final RMSNorm
// -> lm_head logits. Every sequence b of the batch has its own token id and
// synthetic KV cache, so rows are independent. The MoE layer is pluggable
// so a backend's MoE can run inside the reference step.
// With a sharded spec the step is rank r's (step_spec.h): its attention
// heads, dense MLP slice and MoE shard give partial sums that stand in for
// the all-reduced ones (communication is not modelled here), and the logits
// are its vocabulary slice; they are the unsharded model's only for the
// trivial shard.
// Pure functions (given a pure MoeFn); thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reference/step_spec.h"

namespace moetune::ref {

// Computes the MoE layer `layer`: x = normed hidden [batch][hidden], y =
// output [batch][hidden] (overwritten).
using MoeFn =
    std::function<absl::Status(int layer, const float* x, int batch, float* y)>;

// The reference MoE layer as a backend that reads BF16 activations
// computes it: on the input rounded to BF16. GPU backends read the MLP's
// normed input so; a step checked against the plain reference would differ
// wherever the rounding tips a router near-tie to another expert.
MoeFn Bf16InputReferenceMoe(const StepSpec& spec);

// Another implementation's expert choices: [layer][token * experts_per_token]
// (a layer left empty: the reference's own choices there).
using ProposedRoutes = std::vector<std::vector<int>>;

// Bf16InputReferenceMoe routing as `proposed` says where each token's
// proposed experts are a top-k of the reference's scores to within
// `tolerance` (router.h RouteTokenNear), so that a check over several MoE
// layers compares the same experts where an implementation fed activations
// carried in BF16 broke a near-tie the other way. The caller keeps
// *proposed alive while the MoeFn runs.
MoeFn Bf16InputReferenceMoe(const StepSpec& spec,
                            const ProposedRoutes* proposed, float tolerance);

// How far from the reference's own top-k an implementation that carries its
// activations in BF16 may break a routing near-tie and still be followed:
// flips at score gaps of 2.5e-3 to 3.4e-3 occur on the GPU's step; a choice
// further off is the reference's own again, so a wrong router still shows.
inline constexpr float kCarriedBf16RouteTolerance = 5e-3f;

// The routes a run lists flat, [MoE layer][token][experts_per_token] over
// the step's MoE layers in order (the GPU step's chosen_experts), as
// ProposedRoutes (the dense layers' left empty). InvalidArgument, naming
// the sizes, when `flat` does not hold exactly that for spec.batch tokens.
absl::StatusOr<ProposedRoutes> MoeLayerRoutes(const StepSpec& spec,
                                              const std::vector<int>& flat);

// Logits [spec.batch][VocabSlice] of sequences 0 .. batch-1 (the whole
// vocabulary for the trivial shard); under data-parallel attention
// [OwnBatch][vocab] of the rank's own sequences (FirstOwnSequence on). A
// null `moe` uses MoeLayerReference.
// INVALID_ARGUMENT for a bad spec or a shard the step cannot split
// (ValidateStepShard); a failing MoeFn's status is returned.
absl::StatusOr<std::vector<float>> DecodeStep(const StepSpec& spec,
                                              const MoeFn& moe);

// The same for sequences first_sequence .. first_sequence + batch - 1, so a
// batch row can be recomputed alone (under data-parallel attention, counted
// from the rank's first own sequence).
absl::StatusOr<std::vector<float>> DecodeSequences(const StepSpec& spec,
                                                   int first_sequence,
                                                   const MoeFn& moe);

// What one decoder layer computed, for checks against another
// implementation of the model (tests/kernels/reference/hf_golden_test.cc).
struct LayerTrace {
  std::vector<float> hidden;   // [batch][hidden] the residual stream after it
  std::vector<float> mlp_out;  // [batch][hidden] its MLP block's output
  // Per sequence: the new token's latent entry and indexer key (float).
  std::vector<std::vector<float>> new_latent, new_key;
  // Per sequence: the indexer's scores of tokens 0..context and the kept
  // set attended to (ascending).
  std::vector<std::vector<float>> index_scores;
  std::vector<std::vector<int>> kept;
};
struct StepTrace {
  std::vector<LayerTrace> layers;  // filled by DecodeStepTraced
  // [layer][sequence]: kept sets to attend to instead of the indexer's
  // own (empty: the indexer decides), to follow an implementation that
  // broke an indexer tie the other way.
  std::vector<std::vector<std::vector<int>>> forced_kept;
  // [layer][sequence]: another implementation's kept sets, attended to
  // where near the indexer's own (AttentionTrace::proposed_kept; empty: the
  // indexer decides).
  std::vector<std::vector<std::vector<int>>> proposed_kept;
  float kept_tolerance = 0.0f;
};

// DecodeStep (null moe: the reference MoE), filling trace->layers.
absl::StatusOr<std::vector<float>> DecodeStepTraced(const StepSpec& spec,
                                                    StepTrace* trace);

// Another implementation's kept sets: [layer][sequence] token indices.
using ProposedKept = std::vector<std::vector<std::vector<int>>>;

// How far below the k-th indexer score, as a share of the sequence's
// largest score magnitude, a kept token of an implementation that carries
// its activations in BF16 may score and still be followed (tiny's scores
// tie at zero where ReLU removes every head's term).
inline constexpr float kCarriedBf16KeptTolerance = 5e-3f;

// DecodeStep attending, at each layer and sequence, to the proposed kept
// set where it is near the indexer's own top k (AttentionTrace::
// proposed_kept, within kept_tolerance), to the indexer's own elsewhere.
absl::StatusOr<std::vector<float>> DecodeStepFollowingKept(
    const StepSpec& spec, const MoeFn& moe, ProposedKept kept,
    float kept_tolerance);

// Another implementation's choices of a step (MoeLayerRoutes,
// LayerKeptSets), either left empty where it reported none.
struct ProposedChoices {
  ProposedRoutes routes;
  ProposedKept kept;
};

// What a GPU step is checked against: sequences first_sequence on
// (DecodeSequences) with the MoE on its input in BF16, as the GPU reads it
// (Bf16InputReferenceMoe), following the proposed routes and kept sets
// where they are near the reference's own top k by the carried-BF16
// tolerances above, the reference's own choices elsewhere.
absl::StatusOr<std::vector<float>> DecodeSequencesFollowing(
    const StepSpec& spec, int first_sequence, ProposedChoices proposed);

// The kept sets a run lists flat, `kept` [layers][batch][index_topk] with
// `counts` [layers][batch] of each row used (the GPU step's kept_tokens and
// kept_counts), as ProposedKept. InvalidArgument, naming the sizes, when
// they are not that for spec.layers x spec.batch.
absl::StatusOr<ProposedKept> LayerKeptSets(const StepSpec& spec,
                                           const std::vector<int>& kept,
                                           const std::vector<int>& counts);

// `steps` decode steps in a row from spec (its context the synthetic past):
// each step's tokens are the previous step's greedy choices, and each
// step's new tokens' entries are appended to the caches as they store them
// (latent rounded to BF16, keys to FP8 E4M3) for the next. Logits
// [steps][batch][vocab]. INVALID_ARGUMENT for steps < 1 or a sharded spec
// (the next token needs the whole vocabulary), or as DecodeStep.
absl::StatusOr<std::vector<std::vector<float>>> DecodeSteps(
    const StepSpec& spec, int steps, const MoeFn& moe);

// Bytes the rank's decode step must at least move (step_bytes.h), with each
// MoE layer's routed experts counted as if it routed MoeLayerInput (the
// step's own routing is only known by running it). Assumes a valid spec.
int64_t DecodeStepBytes(const StepSpec& spec);

}  // namespace moetune::ref
