// The decode step's small ops: embedding rows, RMSNorm, the indexer key's
// LayerNorm, RoPE, residual adds, SiLU(gate) * up, the cache append, the
// argmax and the gang's best token; one .cu file an op (embed.cu, norms.cu,
// rope.cu, silu_mul.cu, append_entries.cu, argmax.cu, best_token.cu). Each
// Launch* enqueues one kernel on `stream` as `policy` says (capturable in a
// graph) and checks the launch. Rows are sequences of the batch; float
// activations. Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"

namespace moetune::gpu {

// RoPE of one position: cos and sin of each pair (double, as the reference
// computes them), on the device.
struct RopeTable {
  const double* cos = nullptr;
  const double* sin = nullptr;
  int pairs = 0;
};

// h[b][i] = embedding[tokens[b]][i]: the BF16 weight straight from the hash
// (layer 0, tensor kEmbedding, scale 1/sqrt(hidden)).
GpuStatus LaunchEmbed(const int* tokens, int batch, int hidden, uint64_t seed,
                      float scale, float* h, cudaStream_t stream,
                      const LaunchPolicy& policy);

// out[b][:n] = x[b][:n] / rms * gamma, rows `x_stride` / `out_stride` apart
// (out may be x). Also, when non-null, the result as BF16 bits and as the
// BF16-rounded float (the MoE layer's input forms).
struct NormOut {
  float* out = nullptr;
  int64_t stride = 0;
  uint16_t* bf16 = nullptr;     // [batch][n]
  float* bf16_float = nullptr;  // [batch][n]
  // When >= 0: RoPE, in place on out's rows, of the 2 * rope.pairs elements
  // from rope_offset (past the n normed ones: the latent entry's rope key),
  // in the norm's launch rather than one of its own.
  int rope_offset = -1;
  RopeTable rope;
};
// h [batch][n] += add (when not null: the residual of the block before,
// added here rather than by a kernel of its own), then RMSNorm of h as
// RowNorms' RMSNorm job.
GpuStatus LaunchAddRmsNorm(float* h, const float* add, const float* gamma,
                           int n, float eps, int batch, const NormOut& out,
                           cudaStream_t stream, const LaunchPolicy& policy);

// Norms of several tensors' rows in one launch (a block a row and job):
// the latent's after the input projections. An RMSNorm job: out[b][:n] =
// x[b][:n] / rms * gamma, rows `x_stride` apart (out may be x), with out's
// other forms and RoPE as NormOut says. A layer_norm job (the indexer key,
// in place on x [batch][n]): LayerNorm (gamma, beta, eps, biased
// variance), then RoPE (out.rope) on its first 2 * rope.pairs elements.
struct RowNorm {
  bool layer_norm = false;
  float* x = nullptr;
  int64_t x_stride = 0;
  const float* gamma = nullptr;
  const float* beta = nullptr;  // layer_norm
  int n = 0;
  float eps = 0;
  NormOut out;
};
struct RowNorms {
  static constexpr int kMaxJobs = 3;
  RowNorm job[kMaxJobs];
  int jobs = 0;
};
GpuStatus LaunchRowNorms(const RowNorms& norms, int batch, cudaStream_t stream,
                         const LaunchPolicy& policy);

// RoPE in place on `rows` rows of `stride` floats, at `offset` in each row
// (interleaved pairs, kernels/reference/ops.h ApplyRope).
GpuStatus LaunchRope(float* x, int rows, int stride, int offset,
                     const RopeTable& rope, cudaStream_t stream,
                     const LaunchPolicy& policy);
// Two sets of rows (each as LaunchRope's x, rows, stride, offset) in one
// launch; b may have no rows.
struct RopeRows {
  float* x = nullptr;
  int rows = 0, stride = 0, offset = 0;
};
GpuStatus LaunchRopeRows(const RopeRows& a, const RopeRows& b,
                         const RopeTable& rope, cudaStream_t stream,
                         const LaunchPolicy& policy);

// The step's new tokens' cache entries, written at token `position` of
// each sequence's caches (rows `stride` tokens apart) in the caches'
// formats: the latent entry (normed, rotated) as BF16, or with latent_fp8
// its kv_lora latent values as FP8 with their groups' scales
// (kernels/model/kv_fp8_format.h, rows of kvfp8::RowLayoutOf) and its rope
// key as BF16; the indexer key as FP8 E4M3 (all rounded to nearest even,
// as the reference rounds them).
struct AppendEntries {
  const float* latent_entry = nullptr;  // [batch][latent_dim]
  int latent_dim = 0;
  const float* key = nullptr;  // [batch][key_dim]
  int key_dim = 0;
  int batch = 1, position = 0, stride = 0;
  uint16_t* latent = nullptr;     // [batch][stride][latent_dim]
  uint8_t* keys = nullptr;        // [batch][stride][key_dim]
  uint8_t* latent_fp8 = nullptr;  // instead of latent: FP8 rows
  int kv_lora = 0;                // latent_fp8: where the rope key starts
};
GpuStatus LaunchAppendEntries(const AppendEntries& a, cudaStream_t stream,
                              const LaunchPolicy& policy);

// act[b][j] = SiLU(gu[b][j]) * gu[b][width + j], gu rows 2 * width wide.
GpuStatus LaunchSiluMul(const float* gu, int width, int batch, float* act,
                        cudaStream_t stream, const LaunchPolicy& policy);

// next[b] = first_token + the index of the largest logits[b][:width] (the
// lowest on ties).
GpuStatus LaunchArgMax(const float* logits, int width, int batch,
                       int first_token, int* next, cudaStream_t stream,
                       const LaunchPolicy& policy);
// The gang's best token (step_launch.cu GatherBest): rank `rank` writes
// (logit, token) of its slice's argmax (next[i], a token of the whole
// vocabulary, its logit at next[i] - first_token) into row `rank` of
// best [world][batch][2] and zeros elsewhere; after the sum over the gang
// PickBest writes each sequence's best token (lowest token on a tie).
GpuStatus LaunchPostBest(const float* logits, int width, int first_token,
                         const int* next, int batch, int rank, int world,
                         float* best, cudaStream_t stream,
                         const LaunchPolicy& policy);
GpuStatus LaunchPickBest(const float* best, int batch, int world, int* next,
                         cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace moetune::gpu
