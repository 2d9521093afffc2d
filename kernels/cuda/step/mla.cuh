// The decode step's attention kernels (docs/design.md §2): the DSA
// indexer's scores over the FP8 key cache (indexer_scores.cu), the top-k
// choice of the tokens to attend to (topk.cu), and absorbed MLA over the
// chosen tokens of the latent cache (mla.cu, mla_mma.cu). The new token
// (position `context`) is never read from a cache: its key and latent entry
// come from this step's float buffers, as the reference has them. Launch-only;
// not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"

namespace moetune::gpu {

inline constexpr int kMaxIndexHeads = 32;

// scores[b][t], t <= context: sum_h w[b][h] * w_scale *
// ReLU(q[b][h] . k_t * dot_scale), k_t the FP8 key of past token t
// (keys [batch][key_stride][dim]) or new_key[b] for t == context.
struct IndexerScores {
  const float* q = nullptr;        // [batch][heads][dim], rotated
  const float* w = nullptr;        // [batch][heads]
  const float* new_key = nullptr;  // [batch][dim]
  const uint8_t* keys = nullptr;   // E4M3
  int key_stride = 0;              // tokens a sequence's keys hold
  int heads = 0, dim = 0, context = 0, batch = 1;
  float w_scale = 0, dot_scale = 0;
  float* scores = nullptr;  // [batch][context + 1]
  int sm_count = 0;         // 0: the current device's
};
GpuStatus LaunchIndexerScores(const IndexerScores& s, cudaStream_t stream,
                              const LaunchPolicy& policy);

// kept[b][:kept_n] = the indices of the top k of scores[b][:n] (every index
// when n <= k), ascending; ties at the boundary keep the lower index (the
// reference's rule). kept rows are k wide.
GpuStatus LaunchTopK(const float* scores, int n, int k, int batch, int* kept,
                     int* kept_n, cudaStream_t stream,
                     const LaunchPolicy& policy);

// For each of this rank's heads h and sequence b: scores of the kept tokens
// (q_lat . c_t + q_rope . k_rope_t) * scale, softmax, and
// out_lat[b][h] = sum_t p_t c_t. Past entries [kv_lora | rope] come from the
// cache: BF16 (latent [batch][cache_stride][kv_lora + rope]), or FP8 when
// latent_fp8 is set (rows of kvfp8::RowLayoutOf(kv_lora, rope): E4M3
// latent, an FP32 scale a 128, BF16 rope key; dequantized in registers as
// the entries are staged); the new token's from new_entry
// [batch][kv_lora + rope]. Split over the kept tokens
// (flash-decoding): a block takes kAttentionTokens of them for up to
// kAttentionHeads heads (2 where a small batch would leave the GPU idle),
// staging their entries in shared memory once for all its heads, and writes a
// partial (max, sum, weighted values); a second kernel combines the partials.
// kv_lora + rope must be a multiple of 8 and kv_lora of 4 (16-byte loads);
// FP8: kv_lora of 16 and rope of 8.
struct SparseAttention {
  const float* q_lat = nullptr;  // [batch][heads][kv_lora]
  const float* q = nullptr;      // the rope part at q + rope_offset
  int64_t q_stride = 0, q_head_stride = 0;
  int rope_offset = 0;
  const uint16_t* latent = nullptr;
  const uint8_t* latent_fp8 = nullptr;  // instead of latent: the FP8 rows
  int cache_stride = 0;  // tokens a sequence's latent cache holds
  const float* new_entry = nullptr;
  const int* kept = nullptr;  // [batch][k]
  const int* kept_n = nullptr;
  int k = 0, heads = 0, kv_lora = 0, rope = 0, context = 0, batch = 1;
  float scale = 0;
  float* out_lat = nullptr;  // [batch][heads][kv_lora]
  // [batch][heads][SparseAttentionSplits(k)][kv_lora + 2] scratch.
  float* partial = nullptr;
  // Scratch of the tensor-core path over the BF16 cache (mla_mma.cuh), or
  // null (each split block then makes its own): the queries' mma fragments,
  // SparseAttentionQueryFrags(batch, heads, kv_lora + rope) elements, and
  // the new token's dot products [batch][heads], made once a (sequence,
  // head group) before the splits.
  uint2* query_frags = nullptr;
  float* fresh_dots = nullptr;
  // The caller makes the fragments off the attention's chain, by
  // LaunchAttentionQueries on a side stream beside the indexer, before
  // LaunchSparseAttention (which then does not make them): from one
  // sequence, not only from kPrebuiltQueriesFromBatch (mla_mma.cuh).
  bool queries_beside = false;
};
inline size_t SparseAttentionQueryFrags(int batch, int heads, int dim) {
  return static_cast<size_t>(batch) * heads * (dim / 16) * 3 * 32;
}
inline constexpr int kAttentionTokens = 32;
inline constexpr int kAttentionHeads = 8;
inline int SparseAttentionSplits(int k) {
  return (k + kAttentionTokens - 1) / kAttentionTokens;
}
// sm_count: the device's, to choose how many heads a block takes.
GpuStatus LaunchSparseAttention(const SparseAttention& a, int sm_count,
                                cudaStream_t stream,
                                const LaunchPolicy& policy);
// The queries' fragments and the new token's dots that the tensor-core
// split kernel reads when they are made before its blocks (mla_mma.cuh),
// launched on `stream` ahead of LaunchSparseAttention: they need the
// queries and the new entry, not the indexer's choice, so the step makes
// them beside the indexer rather than after it (a.queries_beside).
// Nothing is launched where a does not take them.
GpuStatus LaunchAttentionQueries(const SparseAttention& a, int sm_count,
                                 cudaStream_t stream,
                                 const LaunchPolicy& policy);
// Tiles of kAttentionTokens kept tokens each split block takes (1 but for
// the tensor-core kernel at many sequences: mla_mma.cuh).
int SparseAttentionBlockTiles(const SparseAttention& a, int sm_count);

}  // namespace moetune::gpu
