// Rank r's shard of the decode step's weights and caches, generated on the
// device from the counter hash (kernels/model/weight_gen.h, cache_gen.h)
// straight into the layouts the step's kernels read: BF16 row-major
// matrices (the rank's rows or columns of each), plain row-major NVFP4 for
// the dense MLP, float norm parameters, the BF16 latent cache and the FP8
// indexer keys of every sequence. The MoE layers' experts and routers are
// the MoE runtime's (weights.cuh), in the trial backend's layout. Not
// thread-safe (the step runner's lock guards the one cached set).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/layer.cuh"
#include "kernels/cuda/step_gpu.h"
#include "kernels/cuda/weights.cuh"

namespace moetune::gpu {

// What the rank owns (kernels/reference/step_spec.h).
struct StepGeometry {
  int world = 1, rank = 0;
  int heads = 0, head_begin = 0;   // attention heads
  int dense = 0, dense_begin = 0;  // dense MLP intermediate slice
  int vocab = 0, vocab_begin = 0;  // lm_head rows
  int head_dim = 0;                // nope + rope
  int latent_dim = 0;              // kv_lora + rope
};
StepGeometry MakeStepGeometry(const StepProblem& p);
// Decoder layer `layer`'s MoE layer as the MoE runtime sees it (no input).
MoeProblem MoeLayerProblem(const StepProblem& p, int layer);

// One decoder layer's weights (device pointers into StepWeights' buffers).
struct LayerParams {
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  const float *q_a_norm = nullptr, *kv_a_norm = nullptr;
  const float *key_norm = nullptr, *key_bias = nullptr;
  const uint16_t *q_a = nullptr, *kv_a = nullptr;  // whole
  const uint16_t* q_b = nullptr;   // [heads * head_dim][q_lora], this rank's
  const uint16_t* kv_b = nullptr;  // [heads * (nope + v)][kv_lora]
  const uint16_t* o = nullptr;     // [hidden][heads * v]: its heads' columns
  const uint16_t *index_q = nullptr, *index_k = nullptr, *index_w = nullptr;
  // Dense layers: the rank's gate and up rows [2 * dense][hidden] and down
  // columns [hidden][dense], NVFP4.
  const uint8_t *dense_gu_codes = nullptr, *dense_gu_scales = nullptr;
  const uint8_t *dense_down_codes = nullptr, *dense_down_scales = nullptr;
  float dense_gu_scale = 0, dense_down_scale = 0;
  const WeightSet* moe = nullptr;  // MoE layers
};

// What the weights depend on: a step of another batch or context reuses
// them (only the caches are made again).
struct StepWeightKey {
  int device = -1;
  uint64_t seed = 0;
  int layers = 0;
  MoeShard shard;
  WeightLayout layout = WeightLayout::kFp16Bits;
  int hidden = 0, vocab = 0, experts = 0;  // enough to tell presets apart
  bool operator==(const StepWeightKey& o) const;
};

struct StepWeights {
  StepWeightKey key;
  DeviceBuffer dense_part;  // everything but the MoE layers' experts
  std::vector<std::unique_ptr<WeightSet>> moe;  // one a MoE layer
  std::vector<LayerParams> layers;
  const float* final_norm = nullptr;
  const uint16_t* lm_head = nullptr;  // [vocab slice][hidden]
  int64_t bytes = 0;
};

// Every sequence's caches of every layer: latent [batch][tokens]
// [latent_dim] BF16 and keys [batch][tokens][index_dim] E4M3 a layer,
// tokens = CacheTokens(p), the first Prefilled(p) of each synthetic.
struct StepCaches {
  StepWeightKey weights;  // of the same weights' problem
  int batch = 0, prefilled = 0, tokens = 0;
  DeviceBuffer buffer;
  int64_t layer_stride = 0, keys_offset = 0;  // bytes
  int64_t bytes = 0;
  uint16_t* latent(int layer) const;
  uint8_t* keys(int layer) const;
};

// Bytes the shard's weights and caches take, for the fit check.
int64_t StepWeightBytes(const StepProblem& p, WeightLayout layout);
int64_t StepCacheBytes(const StepProblem& p);

StepWeightKey WeightKeyOf(const StepProblem& p, int device,
                          WeightLayout layout);

// Generate the weights, and the caches, of `p` on the current device
// (synchronous).
GpuStatus GenerateStepWeights(const StepProblem& p, int device,
                              WeightLayout layout, StepWeights* w);
GpuStatus GenerateStepCaches(const StepProblem& p, StepCaches* c);

}  // namespace moetune::gpu
