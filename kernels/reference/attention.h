// MLA attention of GLM-5 at decode, with absorbed weights over a latent KV
// cache, and the DSA indexer that picks which cached tokens it attends to
// (docs/design.md §2). Per sequence; each sequence has its own synthetic cache
// of `context` past tokens (model_weights.h) plus the new token's own entry at
// position `context`. Pure functions; thread-safe.
#pragma once

#include <vector>

#include "kernels/reference/step_spec.h"

namespace moetune::ref {

// One head of absorbed attention over `tokens` latent entries, each
// [kv_lora latent | rope key] at `entries + t * (kv_lora + rope)`:
//   score_t = (q_lat . c_t + q_rope . k_rope_t) * scale
//   p = softmax(score);  out_lat = sum_t p_t c_t   [kv_lora]
void AbsorbedAttentionHead(const float* q_lat, const float* q_rope,
                           const float* entries, int tokens, int kv_lora,
                           int rope, float scale, float* out_lat);

// DSA index score of one key, as GLM-5 scales it:
//   sum_h (w[h] / sqrt(heads)) * ReLU((q_h . k) / sqrt(dim)),  q [heads][dim].
// The weights have either sign, so scores do too, and a key that every head's
// ReLU zeroes scores exactly 0.
float IndexerScore(const float* q, const float* w, int heads, int dim,
                   const float* k);

// Indices of the k highest scores, ascending; every index when
// scores.size() <= k. Ties at the boundary (exact zeros are common) keep
// the lower index: the reference's documented rule. Other implementations
// may break them otherwise (torch.topk leaves the order unspecified), so
// comparisons treat a kept set that differs only in tied tokens as equal.
std::vector<int> TopKIndices(const std::vector<float>& scores, int k);

// The DSA scores of tokens 0..context (`context` is the new token) for
// sequence `sequence` at `layer`. The indexer reads q from
// wq_b(q_a_normed) [index_heads][index_head_dim] and rotates each head's
// first qk_rope dims (RoPE at position `context`, ApplyRope's layout); head
// weights from weights_proj(x_normed); past keys from the cache
// (LayerNorm-ed and rotated already); the new key is LayerNorm(wk x_normed)
// (gamma and bias from the hash, index_norm_eps) with its first qk_rope
// dims rotated the same way.
// new_key, when given, receives the new token's key.
std::vector<float> IndexerScores(const StepSpec& spec, int layer, int sequence,
                                 const float* x_normed, const float* q_a_normed,
                                 std::vector<float>* new_key = nullptr);

// The tokens sequence `sequence` attends to at `layer`: the top index_topk
// of IndexerScores.
std::vector<int> IndexerKeep(const StepSpec& spec, int layer, int sequence,
                             const float* x_normed, const float* q_a_normed);

// What one attention block chose, for checks against another
// implementation; and, when `forced_kept` is set, the kept set to use
// instead of the indexer's own (to follow an implementation that broke a
// tie the other way).
struct AttentionTrace {
  const std::vector<int>* forced_kept = nullptr;
  // Else, when `proposed_kept` is set, it is attended to where it is a top
  // index_topk of the indexer's scores to within `kept_tolerance` times the
  // largest score's magnitude (model/near_top_k.h's rule), and the
  // indexer's own set otherwise: a correct indexer carrying its inputs in
  // BF16 may break a near-tie (scores that ReLU left at or near zero among
  // them) the other way.
  const std::vector<int>* proposed_kept = nullptr;
  float kept_tolerance = 0.0f;
  std::vector<float> scores;  // IndexerScores
  std::vector<int> kept;      // the set attended to, ascending
  // The new token's entries as computed (float): its latent entry (normed,
  // rotated) and its indexer key; a multi-step decode appends them.
  std::vector<float> new_latent, new_key;
};

// The attention block of decoder layer `layer` for one sequence: x_normed is
// the attention-RMSNormed hidden [hidden], out the o_proj output [hidden] --
// with a sharded spec, the partial sum of this rank's heads (step_spec.h).
// The q and kv latents are RMS-normed with latent_norm_eps; RoPE is
// ApplyRope's (interleaved) on q's rope dims and on the new rope key.
void MlaAttention(const StepSpec& spec, int layer, int sequence,
                  const float* x_normed, float* out,
                  AttentionTrace* trace = nullptr);

}  // namespace moetune::ref
