#include "kernels/model/model_config.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace moetune::model {
namespace {

// GLM-5 (model_type glm_moe_dsa). Where each value comes from is listed in
// docs/glm5_config.md: the checkpoint's config.json (rms_norm_eps 1e-5,
// rope_parameters {rope_type default, rope_theta 1e6}: plain RoPE, no YaRN)
// and Hugging Face transformers 5.17's GlmMoeDsa, whose latent norms take
// their class default eps 1e-6 and whose indexer key norm is a LayerNorm
// with a bias and eps 1e-6.
ModelConfig Glm5() {
  ModelConfig c;
  c.name = "glm5";
  c.hidden = 6144;
  c.num_layers = 78;
  c.num_dense_layers = 3;
  c.vocab = 154880;
  c.rms_eps = 1e-5f;
  c.latent_norm_eps = 1e-6f;
  c.index_norm_eps = 1e-6f;
  c.rope_theta = 1.0e6f;
  c.q_lora_rank = 2048;
  c.num_heads = 64;
  c.qk_nope_dim = 192;
  c.qk_rope_dim = 64;
  c.kv_lora_rank = 512;
  c.v_head_dim = 256;
  c.index_heads = 32;
  c.index_head_dim = 128;
  c.index_topk = 2048;
  c.num_experts = 256;
  c.experts_per_token = 8;
  c.num_shared_experts = 1;
  c.moe_intermediate = 2048;
  c.routed_scaling = 2.5f;
  c.dense_intermediate = 12288;
  return c;
}

// Same structure as glm5, small enough for exhaustive CPU tests.
ModelConfig Tiny() {
  ModelConfig c = Glm5();
  c.name = "tiny";
  c.hidden = 256;
  c.num_layers = 4;
  c.num_dense_layers = 1;
  c.vocab = 512;
  c.q_lora_rank = 128;
  c.num_heads = 4;
  c.qk_nope_dim = 32;
  c.qk_rope_dim = 16;
  c.kv_lora_rank = 64;
  c.v_head_dim = 32;
  c.index_heads = 4;
  c.index_head_dim = 32;
  c.index_topk = 16;
  c.num_experts = 32;
  c.experts_per_token = 8;
  c.num_shared_experts = 1;
  c.moe_intermediate = 128;
  c.dense_intermediate = 512;
  return c;
}

absl::Status Positive(std::string_view field, double value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("model.", absl::string_view(field.data(), field.size()),
                   ": must be > 0, got ", value));
}

}  // namespace

const std::vector<ModelConfig>& Presets() {
  static const std::vector<ModelConfig>* presets =
      new std::vector<ModelConfig>{Glm5(), Tiny()};
  return *presets;
}

const ModelConfig* FindPreset(std::string_view name) {
  for (const ModelConfig& preset : Presets()) {
    if (preset.name == name) return &preset;
  }
  return nullptr;
}

absl::StatusOr<ModelConfig> PresetByName(std::string_view name) {
  const ModelConfig* preset = FindPreset(name);
  if (preset != nullptr) return *preset;
  return absl::InvalidArgumentError(
      absl::StrCat("model_preset: unknown preset '",
                   absl::string_view(name.data(), name.size()),
                   "'; allowed: ", absl::StrJoin(PresetNames(), ", ")));
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const ModelConfig& preset : Presets()) names.push_back(preset.name);
  return names;
}

bool IsMoeLayer(const ModelConfig& config, int layer) {
  return layer >= config.num_dense_layers;
}

std::vector<std::pair<std::string, int>> ReductionDims(
    const ModelConfig& config) {
  return {{"hidden", config.hidden},
          {"q_lora_rank", config.q_lora_rank},
          {"kv_lora_rank", config.kv_lora_rank},
          {"num_heads*v_head_dim", config.num_heads * config.v_head_dim},
          {"moe_intermediate", config.moe_intermediate},
          {"dense_intermediate", config.dense_intermediate}};
}

namespace {

absl::Status ValidatePositive(const ModelConfig& c) {
  const std::pair<const char*, double> positive[] = {
      {"hidden", c.hidden},
      {"num_layers", c.num_layers},
      {"vocab", c.vocab},
      {"rms_eps", c.rms_eps},
      {"latent_norm_eps", c.latent_norm_eps},
      {"index_norm_eps", c.index_norm_eps},
      {"rope_theta", c.rope_theta},
      {"q_lora_rank", c.q_lora_rank},
      {"num_heads", c.num_heads},
      {"qk_nope_dim", c.qk_nope_dim},
      {"qk_rope_dim", c.qk_rope_dim},
      {"kv_lora_rank", c.kv_lora_rank},
      {"v_head_dim", c.v_head_dim},
      {"index_heads", c.index_heads},
      {"index_head_dim", c.index_head_dim},
      {"index_topk", c.index_topk},
      {"num_experts", c.num_experts},
      {"experts_per_token", c.experts_per_token},
      {"moe_intermediate", c.moe_intermediate},
      {"routed_scaling", c.routed_scaling},
      {"dense_intermediate", c.dense_intermediate}};
  for (const auto& [field, value] : positive) {
    RETURN_IF_ERROR(Positive(field, value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelConfig(const ModelConfig& c) {
  RETURN_IF_ERROR(ValidatePositive(c));
  for (const auto& [field, value] : ReductionDims(c)) {
    if (value % 16 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.", field,
                       ": must be a multiple of 16 (NVFP4 "
                       "block), got ",
                       value));
    }
  }
  if (c.qk_rope_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.qk_rope_dim: must be even (RoPE pairs), got ", c.qk_rope_dim));
  }
  if (c.experts_per_token > c.num_experts) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.experts_per_token: must be <= num_experts (",
                     c.num_experts, "), got ", c.experts_per_token));
  }
  if (c.num_dense_layers < 0 || c.num_dense_layers > c.num_layers ||
      c.num_shared_experts < 0 || c.num_shared_experts > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.num_dense_layers / num_shared_experts: need 0 <= dense <= "
        "num_layers and shared in {0, 1}, got ",
        c.num_dense_layers, " / ", c.num_shared_experts));
  }
  return absl::OkStatus();
}

}  // namespace moetune::model
