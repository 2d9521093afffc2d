// The GPU decode step's public face: plain C++ (no CUDA, abseil or gRPC
// headers), like moe_gpu.h, so the worker calls it from g++-compiled code;
// kernels/cuda/no_cuda.cc answers "built without CUDA" where there is no CUDA.
//
// RunDecodeStep runs rank r's whole decode step of GLM-5 (docs/design.md
// §2; kernels/reference/step_spec.h says what the rank owns): embedding,
// every decoder layer's attention (MLA with absorbed weights over the
// latent cache, BF16 or FP8; the DSA indexer over FP8 keys picking the
// attended tokens) and MLP (the dense MLP, or the MoE layer through the
// trial's backend), the final norm, its lm_head slice and the argmax, with
// each group of weights in the format StepProblem::formats gives it. Every
// weight and cache entry is generated on the device from the counter hash.
// Communication after each sharded block: with StepRunOptions::comm, a real
// sum over the gang (NCCL or the one-shot all-reduce,
// kernels/cuda/comm/comm_gpu.h) and the ranks' best tokens gathered, so every
// rank computes the whole model's step; without it the rank's partial sum
// stands in for the collective (modelled by the worker). Safe without a GPU:
// errors come back as values. Uses the device exclusively while it runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/moe/moe_gpu.h"

namespace moetune::gpu {

class GangComm;  // kernels/cuda/comm/comm_gpu.h

// The model's dimensions (kernels/model/model_config.h's, as plain values).
struct StepDims {
  int hidden = 0, num_dense_layers = 0, vocab = 0;
  float rms_eps = 0, latent_eps = 0, index_eps = 0;
  int q_lora = 0, heads = 0, nope = 0, rope = 0, kv_lora = 0, v_dim = 0;
  int index_heads = 0, index_dim = 0, index_topk = 0;
  int dense_inter = 0;
  MoeDims moe;
};

// The workload's formats (kernels/reference/step_spec.h Quantization and
// KvCacheDtype): which projections are NVFP4 (E2M1 codes, an E4M3 scale a
// 16, an FP32 tensor scale) rather than BF16, and the latent cache's dtype.
struct StepFormats {
  bool attention_nvfp4 = false;  // MLA and indexer projections
  bool dense_bf16 = false;       // the dense MLP (NVFP4 by default)
  bool lm_head_nvfp4 = false;
  // The latent cache in FP8 E4M3 with an FP32 scale a 128 values and the
  // rope key in BF16 (kernels/model/kv_fp8_format.h), rather than BF16.
  bool kv_fp8 = false;
};

struct StepProblem {
  StepDims dims;
  StepFormats formats;
  uint64_t seed = 0;
  int layers = 1;           // the first `layers` decoder layers
  int batch = 1;            // sequences, each its own token and caches
  int context = 0;          // past tokens in every sequence's caches
  MoeShard shard;           // rank = ep_rank * tp + tp_rank; world = tp * ep
  std::vector<int> tokens;  // [batch] token ids
  // [MoE layers run][experts]: each MoE layer's e_score_correction_bias.
  std::vector<std::vector<float>> router_bias;
  // RoPE at position `context`: cos and sin of pair i (rope / 2 of each),
  // as the reference computes them (double).
  std::vector<double> rope_cos, rope_sin;
  // Several steps in a row: each sequence's caches hold `cache_tokens`
  // tokens (0: context), the first `prefilled` of them synthetic (-1:
  // context); with StepRunOptions::append_to_caches a step writes its
  // tokens' entries at position `context`, for the next step's context + 1.
  int prefilled = -1;
  int cache_tokens = 0;
  // Data-parallel attention (kernels/reference/step_spec.h Shard): `batch`
  // is this rank's own sequences, the first of them the step's sequence
  // `first_sequence` (their tokens and caches); attention, the dense MLP
  // and lm_head are whole; each MoE layer runs over every rank's tokens
  // (MoeTokens), this rank's at rows rank * batch: all-gathered before it,
  // its output reduce-scattered after it with a gang. Without a gang the
  // other rows hold `peer_moe_input` ([MoeTokens][hidden], BF16 values as
  // floats; this rank's rows unused), standing in for the other ranks'
  // tokens so the experts' load is the whole batch's, and the rank's
  // partial sums stand in for the reduce-scatter.
  bool dp_attention = false;
  int first_sequence = 0;
  std::vector<float> peer_moe_input;
};
inline int World(const StepProblem& p) { return p.shard.tp * p.shard.ep; }
// The tokens each MoE layer computes.
inline int MoeTokens(const StepProblem& p) {
  return p.dp_attention ? p.batch * World(p) : p.batch;
}
// The expert choices each MoE layer's router makes (StepRunResult's
// chosen_experts a layer).
inline size_t MoeChoices(const StepProblem& p) {
  return size_t(MoeTokens(p)) * p.dims.moe.top_k;
}
inline int Prefilled(const StepProblem& p) {
  return p.prefilled < 0 ? p.context : p.prefilled;
}
inline int CacheTokens(const StepProblem& p) {
  return p.cache_tokens > p.context ? p.cache_tokens : p.context;
}

struct StepRunOptions {
  std::string backend;      // the MoE layers' backend
  backends::Tile tile;      // its tile; Tile{}: the backend's own
  bool cuda_graph = false;  // the whole step captured in one graph
  // The step's own kernels launched overlapped, each scheduled while the one
  // before it finishes (kernels/cuda/base/launch.cuh); off: each waits
  // for the previous to drain.
  bool overlap_launches = true;
  // Kernels issue the reads that do not depend on the kernel before them
  // ahead of waiting for it (LaunchPolicy::weights_ahead).
  bool weights_ahead = false;
  int warmup = 3;
  int iterations = 20;
  int device = 0;
  // Check every MoE layer against the trusted path (plain kernels from the
  // hash) on that layer's own input in the step: the oracle at dims the CPU
  // cannot run. (A whole step is not compared with a whole trusted step:
  // over tens of layers the two drift apart wherever BF16 rounding tips a
  // router near-tie, however right both are.)
  bool compute_reference = false;
  // Time each part of the step in an extra eager pass of the same schedule,
  // observed (an event where each part begins on its stream):
  // StepRunResult::part_us.
  bool profile_parts = false;
  // Write the step's tokens' latent entries (in the cache's format) and
  // indexer keys (FP8 E4M3) into the caches at position `context` (every run of
  // the step writes the same values), so that a step at context + 1 with the
  // same prefilled and cache_tokens attends to them. Needs cache_tokens >
  // context.
  bool append_to_caches = false;
  // The gang this rank belongs to (not owned): after attention and after
  // the MLP of every layer the block's output [batch][hidden] is summed
  // over the gang (one all-reduce of every rank's partial: for EP the
  // combine of the experts' outputs, the batch being on every rank), and
  // after lm_head the ranks' best tokens are gathered (a sum of a [world]
  // [batch] table of (value, token)). Under data-parallel attention instead
  // each MoE layer's BF16 input is all-gathered and its output
  // reduce-scattered (StepProblem::dp_attention). Every rank of the gang
  // must run the same step with the same options at once. Null: no
  // communication.
  GangComm* comm = nullptr;
};

struct StepRunResult {
  RunStatus status = RunStatus::kOk;
  std::string message;
  std::vector<double> samples_us;  // raw timed iterations (us a step)
  // From an untimed run: [batch][vocab / world] this rank's logits slice
  // (the whole vocabulary under data-parallel attention); with
  // compute_reference, [MoE layers][MoeTokens][hidden] each MoE layer's
  // output and the trusted path's on the same input.
  std::vector<float> logits;
  std::vector<float> moe_output, moe_reference;
  // The logits the last timed iteration left (the graph's replay when
  // cuda_graph): what the timed work computed, against `logits`.
  std::vector<float> timed_logits;
  // [batch]: the argmax of the rank's slice, as a token id of the whole
  // vocabulary (with a gang: of the whole vocabulary, gathered).
  std::vector<int> next_tokens;
  // Per MoE layer run: the distinct experts this rank owns that the step's
  // tokens chose (the floor's routed bytes).
  std::vector<int> distinct_experts;
  // [MoE layers][MoeTokens][top_k]: each MoE layer's router's choices
  // (expert indices of the whole model), for a reference to follow near a
  // routing tie (reference decode_step.h ProposedRoutes).
  std::vector<int> chosen_experts;
  // [layers][batch][index_topk] each layer's kept tokens (the first
  // kept_counts [layers][batch] of each row; in no order), for a reference
  // to follow near an indexer tie (reference decode_step.h ProposedKept).
  std::vector<int> kept_tokens, kept_counts;
  // Nodes of the step's CUDA graph (kernels and copies); 0 when the
  // backend cannot be captured.
  int kernels_per_step = 0;
  // The MoE backend's tile the step ran (StepRunOptions' or, naming none,
  // the backend's for the layer: BackendDescriptor::TileFor); 0 x 0 for a
  // backend without tiles.
  backends::Tile tile;
  int64_t weight_bytes = 0;  // resident weights of the rank's shard
  int64_t cache_bytes = 0;   // resident KV caches and indexer keys
  // profile_parts: ("part/kernel", microseconds of one eager step, summed
  // over the layers), in step order of first appearance. Parts: "embed",
  // "attention" (its norm, the q and kv latents), "indexer" (its
  // projections, scores, top-k), "mla" (absorbed attention over the kept
  // tokens, values, o_proj, residual), "dense", "moe", "lm_head", "comm".
  // "mla/absorb" and "mla/queries" run on the side stream beside the
  // indexer: their time overlaps the step's, so the parts can sum to more
  // than the step.
  std::vector<std::pair<std::string, double>> part_us;
  // With a gang: the median time (us) of the step's collectives alone (the
  // same sums on the same buffers, in a graph when cuda_graph), beside the
  // whole step's; and how many collectives a step makes.
  double comm_us = 0;
  int collectives_per_step = 0;
  // Seconds in the checked run (and its trusted MoE path) and in warm-ups
  // and timed iterations (the step's and its collectives'); the rest of the
  // call is setup (weights, caches, graph capture) and the profile pass.
  double check_s = 0, timed_s = 0;
};

StepRunResult RunDecodeStep(const StepProblem& problem,
                            const StepRunOptions& options);

}  // namespace moetune::gpu
