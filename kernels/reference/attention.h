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

// DSA index score of one key: sum_h w[h] * ReLU(q_h . k), q [heads][dim].
float IndexerScore(const float* q, const float* w, int heads, int dim,
                   const float* k);

// Indices of the k highest scores (ties: the lower index wins), ascending;
// every index when scores.size() <= k.
std::vector<int> TopKIndices(const std::vector<float>& scores, int k);

// The tokens (0..context, where `context` is the new token) that sequence
// `sequence` attends to at `layer`: the top index_topk of the DSA scores.
// The indexer reads q from wq_b(q_a_normed) [index_heads][index_head_dim],
// head weights from weights_proj(x_normed), past keys from the cache and
// the new key from LayerNorm(wk x_normed) (gamma from the hash, no bias).
// The real indexer also rotates part of q and k; that changes no byte or
// FLOP and is left out.
std::vector<int> IndexerKeep(const StepSpec& spec, int layer, int sequence,
                             const float* x_normed, const float* q_a_normed);

// The attention block of decoder layer `layer` for one sequence: x_normed is
// the attention-RMSNormed hidden [hidden], out the o_proj output [hidden].
void MlaAttention(const StepSpec& spec, int layer, int sequence,
                  const float* x_normed, float* out);

}  // namespace moetune::ref
