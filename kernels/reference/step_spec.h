// What one decode step (or one MoE layer) computes: the model, how many
// layers, batch, context, routing distribution, seed and the rank's shard
// (docs/design.md §2). Plain values and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/model/model_config.h"

namespace moetune::ref {

// How tokens pick experts. The router itself is the model's (sigmoid of
// BF16 logits); the distribution is steered through the per-layer
// e_score_correction_bias (see RouterBias in router.h).
struct RoutingSpec {
  enum class Kind { kUniform, kSkewed, kReplayed };
  Kind kind = Kind::kUniform;
  double skew = 1.0;              // kSkewed: Zipf exponent, >= 0
  std::vector<double> histogram;  // kReplayed: one count per expert, >= 0
};

// Rank r of a tp x ep grid: r = ep_rank * tp + tp_rank. EP: expert e lives on
// ep_rank e / (num_experts / ep). TP: the intermediate dim of every expert
// and of the shared expert is cut into tp contiguous slices; the shared
// expert runs on ep_rank 0 only. The rest of the decode step is split over
// the whole world (tp * ep ranks, rank r its r-th part), as a deployment runs
// attention TP-wide in both layouts ("EP8, attention TP8"): attention heads
// (q_b's and kv_b's rows, o_proj's columns of those heads), the dense MLP's
// intermediate dim, lm_head's vocabulary. The latent projections (q_a, kv_a)
// and the DSA indexer are computed whole on every rank (the indexer's
// choice is shared by all heads). Each sharded block's output is the rank's
// partial sum (a vocabulary slice for lm_head) standing in for the
// collective after it.
//
// With dp_attention (data-parallel attention, the API's ATTENTION_DP) the
// rest of the step is whole on every rank instead, and rank r decodes its
// own batch / (tp * ep) sequences (OwnBatch, FirstOwnSequence); the MoE
// layers still run the tp x ep split above, over every rank's tokens: an
// all-gather of the ranks' MoE inputs before, a reduce-scatter of the
// partial outputs after (each rank its own tokens' sums). Without peers the
// other ranks' tokens are synthetic MoE inputs and the rank's partial sums
// stand in for the reduce-scatter.
struct Shard {
  int tp = 1;
  int ep = 1;
  int rank = 0;
  bool dp_attention = false;
};

// What the steps before this one of a multi-step decode (decode_step.h
// DecodeSteps) left: their tokens' cache entries past the synthetic ones,
// as the caches store them (BF16 latent values, E4M3 key values), and the
// tokens they chose for this step.
struct Generated {
  int prefilled = 0;        // synthetic past tokens (the first step's context)
  std::vector<int> tokens;  // [sequence] this step's input tokens
  // [layer][sequence]: entries of tokens prefilled, prefilled + 1, ...,
  // (kv_lora + rope) and index_head_dim values each, back to back.
  std::vector<std::vector<std::vector<float>>> latent, keys;
};

// The number format of a group of weights (the workload's QuantizationMap;
// docs/design.md §2).
enum class Precision { kNvfp4, kBf16 };
// The step's formats. The member defaults are the one definition of the
// defaults: a QuantizationMap's unset groups take them (the worker resolves
// a map with them, the tuner clears groups equal to them, the store's
// quantization column names the groups that differ from them).
struct Quantization {
  Precision attention = Precision::kBf16;  // MLA and indexer projections
  Precision dense_mlp = Precision::kNvfp4;
  Precision lm_head = Precision::kBf16;
  bool operator==(const Quantization&) const = default;
};
// The routed experts' and the shared expert's format, the only one they
// take: the MoE backends are NVFP4 kernels.
inline constexpr Precision kExpertPrecision = Precision::kNvfp4;

// The latent cache's format (kernels/model/kv_fp8_format.h for FP8). The
// indexer keys are FP8 E4M3 either way.
enum class KvCacheDtype { kBf16, kFp8E4M3 };

struct StepSpec {
  model::ModelConfig config;
  int layers = 0;   // decoder layers run (the first `layers`), > 0, resolved
  int batch = 1;    // sequences decoded together, >= 1
  int context = 0;  // past tokens in each sequence's KV cache, >= 0
  RoutingSpec routing;
  uint64_t seed = 0;
  Shard shard;
  Quantization quantization;
  KvCacheDtype kv_cache = KvCacheDtype::kBf16;
  // Set by DecodeSteps for its steps after the first (not owned): past
  // tokens from `prefilled` on and the input tokens come from it.
  const Generated* generated = nullptr;
};

// OK, or INVALID_ARGUMENT naming the bad field and its allowed values.
absl::Status ValidateStepSpec(const StepSpec& spec);
absl::Status ValidateShard(const model::ModelConfig& config,
                           const Shard& shard);
// ValidateShard, and the decode step's world-wide split: tp * ep must
// divide num_heads and vocab, and cut dense_intermediate into whole NVFP4
// blocks.
absl::Status ValidateStepShard(const model::ModelConfig& config,
                               const Shard& shard);
// The formats the step's weights can take at its shard: NVFP4 attention
// needs whole 16-value blocks in every projection's reduction (this rank's
// o_proj columns included).
absl::Status ValidateStepFormats(const StepSpec& spec);
absl::Status ValidateRouting(const model::ModelConfig& config,
                             const RoutingSpec& routing);

// Derived shard facts (assume a valid shard).
inline int TpRank(const Shard& s) { return s.rank % s.tp; }
inline int EpRank(const Shard& s) { return s.rank / s.tp; }
inline int ExpertsPerEpRank(const model::ModelConfig& c, const Shard& s) {
  return c.num_experts / s.ep;
}
inline bool OwnsExpert(const model::ModelConfig& c, const Shard& s,
                       int expert) {
  return expert / ExpertsPerEpRank(c, s) == EpRank(s);
}
inline bool OwnsShared(const model::ModelConfig& c, const Shard& s) {
  return c.num_shared_experts > 0 && EpRank(s) == 0;
}
// The decode step's world-wide split (ValidateStepShard checks it).
inline int World(const Shard& s) { return s.tp * s.ep; }
// The ranks that split attention, the dense MLP and lm_head (1 under
// data-parallel attention), and this rank's part among them.
inline int SplitWorld(const Shard& s) { return s.dp_attention ? 1 : World(s); }
inline int SplitRank(const Shard& s) { return s.dp_attention ? 0 : s.rank; }
// The sequences this rank decodes of a step's batch, and its first.
inline int OwnBatch(const Shard& s, int batch) {
  return s.dp_attention ? batch / World(s) : batch;
}
inline int FirstOwnSequence(const Shard& s, int batch) {
  return s.dp_attention ? s.rank * OwnBatch(s, batch) : 0;
}
inline int HeadsPerRank(const model::ModelConfig& c, const Shard& s) {
  return c.num_heads / SplitWorld(s);
}
inline int HeadBegin(const model::ModelConfig& c, const Shard& s) {
  return SplitRank(s) * HeadsPerRank(c, s);
}
inline int DenseSlice(const model::ModelConfig& c, const Shard& s) {
  return c.dense_intermediate / SplitWorld(s);
}
inline int DenseBegin(const model::ModelConfig& c, const Shard& s) {
  return SplitRank(s) * DenseSlice(c, s);
}
inline int VocabSlice(const model::ModelConfig& c, const Shard& s) {
  return c.vocab / SplitWorld(s);
}
inline int VocabBegin(const model::ModelConfig& c, const Shard& s) {
  return SplitRank(s) * VocabSlice(c, s);
}

// Width of this rank's slice of an expert's intermediate dim, and its start.
inline int InterSlice(const model::ModelConfig& c, const Shard& s) {
  return c.moe_intermediate / s.tp;
}
inline int InterBegin(const model::ModelConfig& c, const Shard& s) {
  return TpRank(s) * InterSlice(c, s);
}

}  // namespace moetune::ref
