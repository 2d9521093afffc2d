// Rank r's shard of the decode step's weights and caches, generated on the
// device from the counter hash (kernels/model/weight_gen.h, cache_gen.h)
// straight into the layouts the step's kernels read: row-major matrices
// (the rank's rows or columns of each) in the format the problem gives their
// group (BF16 values, or plain row-major NVFP4), float norm parameters, the
// latent cache (BF16, or FP8 with scales: kernels/model/kv_fp8_format.h) and
// the FP8 indexer keys of every sequence. The MoE layers' experts and routers
// are the MoE runtime's (weights.cuh), in the trial backend's layout. Not
// thread-safe (the step runner's lock guards the one cached set).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/moe/layer.cuh"
#include "kernels/cuda/moe/weights.cuh"
#include "kernels/cuda/step/step_gpu.h"

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

// A [rows][k] matrix on the device in its group's format: BF16 values
// (bf16 set), or NVFP4 codes [rows][k / 2], block scales [rows][k / 16] and
// the tensor scale (bf16 null).
struct DeviceMatrix {
  const uint16_t* bf16 = nullptr;
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  float tensor_scale = 0;
  bool nvfp4() const { return bf16 == nullptr; }
};

// One decoder layer's weights (device pointers into StepWeights' buffers).
struct LayerParams {
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  const float *q_a_norm = nullptr, *kv_a_norm = nullptr;
  const float *key_norm = nullptr, *key_bias = nullptr;
  DeviceMatrix q_a, kv_a;  // whole
  DeviceMatrix q_b;        // [heads * head_dim][q_lora], this rank's
  DeviceMatrix kv_b;       // [heads * (nope + v)][kv_lora]
  DeviceMatrix o;          // [hidden][heads * v]: its heads' columns
  DeviceMatrix index_q, index_k, index_w;
  // Dense layers: the rank's gate and up rows [2 * dense][hidden] and down
  // columns [hidden][dense].
  DeviceMatrix dense_gu, dense_down;
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
  // The weights' formats (StepFormats but the cache's).
  bool attention_nvfp4 = false, dense_bf16 = false, lm_head_nvfp4 = false;
  bool dp_attention = false;  // whole attention, dense MLP and lm_head
  bool operator==(const StepWeightKey& o) const;
};

struct StepWeights {
  StepWeightKey key;
  DeviceBuffer dense_part;  // everything but the MoE layers' experts
  std::vector<std::unique_ptr<WeightSet>> moe;  // one a MoE layer
  std::vector<LayerParams> layers;
  const float* final_norm = nullptr;
  DeviceMatrix lm_head;  // [vocab slice][hidden]
  int64_t bytes = 0;
};

// Every sequence's caches of every layer (the rank's own under
// data-parallel attention, from sequence first_sequence on): latent rows
// [batch][tokens] of latent_row_bytes each and keys [batch][tokens][index_dim]
// E4M3 a layer, tokens = CacheTokens(p), the first Prefilled(p) of each
// synthetic. A BF16 latent row is [latent_dim] BF16; an FP8 one (kv_fp8) is
//   [kv_lora] E4M3 | [groups] FP32 scales, padded to 16 bytes | [rope] BF16
// (kvfp8::RowLayout), so that every part starts 16-byte aligned.
struct StepCaches {
  StepWeightKey weights;  // of the same weights' problem
  int batch = 0, first_sequence = 0, prefilled = 0, tokens = 0;
  bool kv_fp8 = false;
  int64_t latent_row_bytes = 0;
  DeviceBuffer buffer;
  int64_t layer_stride = 0, keys_offset = 0;  // bytes
  int64_t bytes = 0;
  uint16_t* latent(int layer) const;  // BF16 rows
  uint8_t* latent_bytes(int layer) const;
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
