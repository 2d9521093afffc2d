// Model dimensions of the decode step (docs/design.md §2): the real GLM-5
// preset and a small preset with the same structure for CPU tests. Plain values
// and pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace moetune::model {

struct ModelConfig {
  std::string name;
  int hidden = 0;
  int num_layers = 0;
  int num_dense_layers = 0;  // the first layers are dense, the rest MoE
  int vocab = 0;
  float rms_eps = 0.0f;  // the hidden-size RMSNorms (layer input, MLP, final)
  // The RMSNorms of the q and kv latents (q_a_layernorm, kv_a_layernorm).
  float latent_norm_eps = 0.0f;
  // The indexer key's LayerNorm (with a bias).
  float index_norm_eps = 0.0f;
  // RoPE base (plain RoPE, no long-context scaling); interleaved pairs, see
  // ApplyRope (kernels/reference/ops.h).
  float rope_theta = 0.0f;
  // MLA attention.
  int q_lora_rank = 0;
  int num_heads = 0;
  int qk_nope_dim = 0;
  int qk_rope_dim = 0;
  int kv_lora_rank = 0;
  int v_head_dim = 0;
  // DSA indexer.
  int index_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  // MoE.
  int num_experts = 0;
  int experts_per_token = 0;
  int num_shared_experts = 0;
  int moe_intermediate = 0;
  float routed_scaling = 0.0f;
  // Dense MLP of the first num_dense_layers layers.
  int dense_intermediate = 0;
};

// The one table of presets: "glm5" (the real dims), then "tiny" (the same
// structure, small enough for exhaustive CPU tests).
const std::vector<ModelConfig>& Presets();
// nullptr when `name` is not a preset.
const ModelConfig* FindPreset(std::string_view name);
// A copy of the preset; INVALID_ARGUMENT naming the allowed presets
// otherwise.
absl::StatusOr<ModelConfig> PresetByName(std::string_view name);

// The preset names, in table order (the order error messages list them).
std::vector<std::string> PresetNames();

// True when decoder layer `layer` (0-based) has an MoE MLP, false when dense.
bool IsMoeLayer(const ModelConfig& config, int layer);

// Every reduction (K) dimension of the NVFP4 and BF16 matrices of the model,
// each with a name: hidden, q_lora_rank, kv_lora_rank, heads*v_head_dim,
// moe_intermediate, dense_intermediate. NVFP4 needs each to be a multiple of
// 16 (one block scale per 16 K elements).
std::vector<std::pair<std::string, int>> ReductionDims(
    const ModelConfig& config);

// OK when every dimension is positive and consistent (K dims multiples of 16,
// even rope dim, top-k <= experts, dense layers <= layers); otherwise
// INVALID_ARGUMENT naming the field.
absl::Status ValidateModelConfig(const ModelConfig& config);

}  // namespace moetune::model
